// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 transport headers: the opcode table, a zero-copy parser and a
//! builder.
//!
//! A RoCEv2 packet is a UDP datagram to port 4791 whose payload is an
//! InfiniBand transport packet:
//!
//! ```text
//! | BTH (12) | extension headers (0..28) | payload | pad (0..3) | ICRC (4) |
//! ```
//!
//! The opcode in the base transport header (BTH) selects the transport
//! (RC, UC, UD, or a congestion notification packet) and which extension
//! headers follow, in a fixed order. [`Opcode::info`] gives that per opcode,
//! following the IBTA opcode table as the kernel's rdma_rxe implements it
//! (`drivers/infiniband/sw/rxe/rxe_opcode.c`, `rxe_hdr.h`,
//! `include/rdma/ib_pack.h`).
//!
//! [`parse`] takes the UDP payload, checks everything that can be checked
//! without per-QP state (see `Documentation/wire-format.rst`) and returns a
//! [`Packet`] that borrows the header bytes and the payload. [`build`] and
//! [`build_headers`] write a packet from decoded [`Headers`]; whatever the
//! builder accepts, the parser accepts and decodes to the same headers.
//!
//! Nothing here panics on any input: lengths are checked before every access
//! and all arithmetic on them is checked.

use super::icrc::ICRC_LEN;
use super::psn::Psn;
use core::fmt;

/// UDP destination port of RoCEv2.
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// Length of the base transport header.
pub const BTH_LEN: usize = 12;
/// Length of the RDMA extended transport header.
pub const RETH_LEN: usize = 16;
/// Length of the ACK extended transport header.
pub const AETH_LEN: usize = 4;
/// Length of the atomic extended transport header.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Length of the atomic ACK extended transport header.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Length of the immediate data header.
pub const IMM_DT_LEN: usize = 4;
/// Length of the invalidate extended transport header.
pub const IETH_LEN: usize = 4;
/// Length of the datagram extended transport header.
pub const DETH_LEN: usize = 8;
/// Length of the flush extended transport header.
pub const FETH_LEN: usize = 4;
/// Length of the reserved block that follows the BTH of a CNP.
pub const CNP_RSVD_LEN: usize = 16;
/// Longest header (BTH + extension headers) of any known opcode.
pub const MAX_HDR_LEN: usize = BTH_LEN + ATOMIC_ETH_LEN;

/// Mask of a 24-bit queue pair number.
pub const QPN_MASK: u32 = 0x00ff_ffff;
/// Destination QPN of multicast packets.
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;
/// The default P_Key.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// Q_Key of the general services interface (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

/// Transport service an opcode belongs to (the opcode's top three bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connection, opcodes `0x00..=0x1f`.
    Rc,
    /// Unreliable connection, opcodes `0x20..=0x3f`.
    Uc,
    /// Unreliable datagram, opcodes `0x60..=0x7f`.
    Ud,
    /// Congestion notification packet (RoCEv2, IBTA Annex A17), `0x81`.
    Cnp,
}

/// What an opcode does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// SEND (with or without immediate or invalidate).
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// ACKNOWLEDGE (ACK or NAK).
    Acknowledge,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAcknowledge,
    /// CmpSwap atomic request.
    CompareSwap,
    /// FetchAdd atomic request.
    FetchAdd,
    /// FLUSH request (IBTA 1.5 memory placement extensions).
    Flush,
    /// ATOMIC WRITE request (IBTA 1.5 memory placement extensions).
    AtomicWrite,
    /// Congestion notification.
    Cnp,
}

impl OpKind {
    /// Which way packets of this kind travel.
    pub const fn direction(self) -> Direction {
        match self {
            Self::RdmaReadResponse | Self::Acknowledge | Self::AtomicAcknowledge => {
                Direction::Response
            }
            Self::Cnp => Direction::Notification,
            _ => Direction::Request,
        }
    }
}

/// Whether a packet is sent by a requester or a responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the requester to the responder.
    Request,
    /// From the responder back to the requester.
    Response,
    /// Neither: a congestion notification.
    Notification,
}

/// Position of a packet within its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message; its payload is exactly one
    /// path MTU.
    First,
    /// Middle packet; exactly one path MTU.
    Middle,
    /// Last packet of a multi-packet message; 1 to path MTU bytes.
    Last,
    /// The only packet of a message; 0 to path MTU bytes.
    Only,
}

impl Position {
    /// Whether the packet starts a message (rxe's `RXE_START_MASK`).
    pub const fn is_start(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }

    /// Whether the packet ends a message (rxe's `RXE_END_MASK`).
    pub const fn is_end(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }
}

/// What payload an opcode may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadRule {
    /// None: the ICRC follows the headers directly.
    None,
    /// Message data, subject to the path MTU rules of its [`Position`].
    Data,
    /// Exactly this many bytes (ATOMIC WRITE carries 8).
    Exactly(usize),
}

/// An extension header that may follow the BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ext {
    /// RDMA extended transport header ([`Reth`]).
    Reth,
    /// ACK extended transport header ([`Aeth`]).
    Aeth,
    /// Atomic extended transport header ([`AtomicEth`]).
    AtomicEth,
    /// Atomic ACK extended transport header ([`AtomicAckEth`]).
    AtomicAckEth,
    /// Immediate data ([`ImmDt`]).
    ImmDt,
    /// Invalidate extended transport header ([`Ieth`]).
    Ieth,
    /// Datagram extended transport header ([`Deth`]).
    Deth,
    /// Flush extended transport header ([`Feth`]).
    Feth,
    /// The 16 reserved bytes of a CNP (ignored on receive, zero on send).
    CnpReserved,
}

impl Ext {
    /// Length of this header on the wire.
    pub const fn wire_len(self) -> usize {
        match self {
            Self::Reth => RETH_LEN,
            Self::Aeth => AETH_LEN,
            Self::AtomicEth => ATOMIC_ETH_LEN,
            Self::AtomicAckEth => ATOMIC_ACK_ETH_LEN,
            Self::ImmDt => IMM_DT_LEN,
            Self::Ieth => IETH_LEN,
            Self::Deth => DETH_LEN,
            Self::Feth => FETH_LEN,
            Self::CnpReserved => CNP_RSVD_LEN,
        }
    }

    /// The header's name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Reth => "RETH",
            Self::Aeth => "AETH",
            Self::AtomicEth => "AtomicETH",
            Self::AtomicAckEth => "AtomicAckETH",
            Self::ImmDt => "ImmDt",
            Self::Ieth => "IETH",
            Self::Deth => "DETH",
            Self::Feth => "FETH",
            Self::CnpReserved => "CNP reserved",
        }
    }
}

/// One entry of the opcode table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The opcode.
    pub opcode: Opcode,
    /// IBTA name, e.g. `"RC_SEND_FIRST"`.
    pub name: &'static str,
    /// Transport service.
    pub transport: Transport,
    /// Operation.
    pub kind: OpKind,
    /// Request, response or notification.
    pub direction: Direction,
    /// Position within the message.
    pub position: Position,
    /// Extension headers following the BTH, in wire order.
    pub exts: &'static [Ext],
    /// Length of the BTH plus the extension headers.
    pub hdr_len: usize,
    /// Payload the opcode may carry.
    pub payload: PayloadRule,
}

impl OpInfo {
    /// Makes a table entry, computing the derived fields.
    const fn new(
        opcode: Opcode,
        name: &'static str,
        transport: Transport,
        kind: OpKind,
        position: Position,
        exts: &'static [Ext],
        payload: PayloadRule,
    ) -> Self {
        let mut hdr_len = BTH_LEN;
        let mut rest = exts;
        while let [ext, tail @ ..] = rest {
            hdr_len += ext.wire_len();
            rest = tail;
        }
        Self {
            opcode,
            name,
            transport,
            kind,
            direction: kind.direction(),
            position,
            exts,
            hdr_len,
            payload,
        }
    }

    /// Whether extension header `ext` follows the BTH.
    pub const fn has(&self, ext: Ext) -> bool {
        let mut rest = self.exts;
        while let [first, tail @ ..] = rest {
            if *first as u8 == ext as u8 {
                return true;
            }
            rest = tail;
        }
        false
    }

    /// Whether the packet consumes a receive WQE at the responder: the first
    /// packet of a SEND, or an RDMA WRITE with immediate (rxe's
    /// `RXE_RWR_MASK`).
    pub const fn consumes_recv_wqe(&self) -> bool {
        match self.kind {
            OpKind::Send => self.position.is_start(),
            OpKind::RdmaWrite => self.has(Ext::ImmDt),
            _ => false,
        }
    }

    /// Whether the packet completes a receive WQE at the responder: the last
    /// packet of a SEND, or an RDMA WRITE with immediate (rxe's
    /// `RXE_COMP_MASK`).
    pub const fn completes_recv_wqe(&self) -> bool {
        match self.kind {
            OpKind::Send => self.position.is_end(),
            OpKind::RdmaWrite => self.has(Ext::ImmDt),
            _ => false,
        }
    }
}

/// Defines [`Opcode`] and its table from one row per opcode:
/// `Variant = code, "NAME", transport, kind, position, [exts], payload;`.
macro_rules! opcode_table {
    ($(
        #[doc = $doc:literal]
        $variant:ident = $code:literal, $name:literal, $transport:ident, $kind:ident,
        $position:ident, [$($ext:ident),*], $payload:ident $(($n:literal))?;
    )*) => {
        /// A BTH opcode rroce knows (IBTA Vol. 1 chapter 9 and Annex A17).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode {
            $(#[doc = $doc] $variant = $code,)*
        }

        impl Opcode {
            /// Every known opcode, in ascending wire order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),*];

            /// The opcode with wire value `code`, or `None` for reserved and
            /// unsupported opcodes (RD, manufacturer specific, ...).
            pub const fn from_u8(code: u8) -> Option<Opcode> {
                match code {
                    $($code => Some(Opcode::$variant),)*
                    _ => None,
                }
            }

            /// The opcode's entry in the opcode table.
            pub const fn info(self) -> &'static OpInfo {
                match self {
                    $(Opcode::$variant => {
                        const INFO: OpInfo = OpInfo::new(
                            Opcode::$variant,
                            $name,
                            Transport::$transport,
                            OpKind::$kind,
                            Position::$position,
                            &[$(Ext::$ext),*],
                            PayloadRule::$payload $(($n))?,
                        );
                        &INFO
                    })*
                }
            }
        }
    };
}

opcode_table! {
    /// RC SEND First.
    RcSendFirst = 0x00, "RC_SEND_FIRST", Rc, Send, First, [], Data;
    /// RC SEND Middle.
    RcSendMiddle = 0x01, "RC_SEND_MIDDLE", Rc, Send, Middle, [], Data;
    /// RC SEND Last.
    RcSendLast = 0x02, "RC_SEND_LAST", Rc, Send, Last, [], Data;
    /// RC SEND Last with Immediate.
    RcSendLastImm = 0x03, "RC_SEND_LAST_WITH_IMMEDIATE", Rc, Send, Last, [ImmDt], Data;
    /// RC SEND Only.
    RcSendOnly = 0x04, "RC_SEND_ONLY", Rc, Send, Only, [], Data;
    /// RC SEND Only with Immediate.
    RcSendOnlyImm = 0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", Rc, Send, Only, [ImmDt], Data;
    /// RC RDMA WRITE First.
    RcWriteFirst = 0x06, "RC_RDMA_WRITE_FIRST", Rc, RdmaWrite, First, [Reth], Data;
    /// RC RDMA WRITE Middle.
    RcWriteMiddle = 0x07, "RC_RDMA_WRITE_MIDDLE", Rc, RdmaWrite, Middle, [], Data;
    /// RC RDMA WRITE Last.
    RcWriteLast = 0x08, "RC_RDMA_WRITE_LAST", Rc, RdmaWrite, Last, [], Data;
    /// RC RDMA WRITE Last with Immediate.
    RcWriteLastImm = 0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Rc, RdmaWrite, Last,
        [ImmDt], Data;
    /// RC RDMA WRITE Only.
    RcWriteOnly = 0x0a, "RC_RDMA_WRITE_ONLY", Rc, RdmaWrite, Only, [Reth], Data;
    /// RC RDMA WRITE Only with Immediate.
    RcWriteOnlyImm = 0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Rc, RdmaWrite, Only,
        [Reth, ImmDt], Data;
    /// RC RDMA READ Request.
    RcReadRequest = 0x0c, "RC_RDMA_READ_REQUEST", Rc, RdmaReadRequest, Only, [Reth], None;
    /// RC RDMA READ Response First.
    RcReadResponseFirst = 0x0d, "RC_RDMA_READ_RESPONSE_FIRST", Rc, RdmaReadResponse, First,
        [Aeth], Data;
    /// RC RDMA READ Response Middle.
    RcReadResponseMiddle = 0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", Rc, RdmaReadResponse,
        Middle, [], Data;
    /// RC RDMA READ Response Last.
    RcReadResponseLast = 0x0f, "RC_RDMA_READ_RESPONSE_LAST", Rc, RdmaReadResponse, Last,
        [Aeth], Data;
    /// RC RDMA READ Response Only.
    RcReadResponseOnly = 0x10, "RC_RDMA_READ_RESPONSE_ONLY", Rc, RdmaReadResponse, Only,
        [Aeth], Data;
    /// RC ACKNOWLEDGE.
    RcAck = 0x11, "RC_ACKNOWLEDGE", Rc, Acknowledge, Only, [Aeth], None;
    /// RC ATOMIC ACKNOWLEDGE.
    RcAtomicAck = 0x12, "RC_ATOMIC_ACKNOWLEDGE", Rc, AtomicAcknowledge, Only,
        [Aeth, AtomicAckEth], None;
    /// RC CmpSwap.
    RcCompareSwap = 0x13, "RC_COMPARE_SWAP", Rc, CompareSwap, Only, [AtomicEth], None;
    /// RC FetchAdd.
    RcFetchAdd = 0x14, "RC_FETCH_ADD", Rc, FetchAdd, Only, [AtomicEth], None;
    /// RC SEND Last with Invalidate.
    RcSendLastInv = 0x16, "RC_SEND_LAST_WITH_INVALIDATE", Rc, Send, Last, [Ieth], Data;
    /// RC SEND Only with Invalidate.
    RcSendOnlyInv = 0x17, "RC_SEND_ONLY_WITH_INVALIDATE", Rc, Send, Only, [Ieth], Data;
    /// RC FLUSH.
    RcFlush = 0x1c, "RC_FLUSH", Rc, Flush, Only, [Feth, Reth], None;
    /// RC ATOMIC WRITE.
    RcAtomicWrite = 0x1d, "RC_ATOMIC_WRITE", Rc, AtomicWrite, Only, [Reth], Exactly(8);
    /// UC SEND First.
    UcSendFirst = 0x20, "UC_SEND_FIRST", Uc, Send, First, [], Data;
    /// UC SEND Middle.
    UcSendMiddle = 0x21, "UC_SEND_MIDDLE", Uc, Send, Middle, [], Data;
    /// UC SEND Last.
    UcSendLast = 0x22, "UC_SEND_LAST", Uc, Send, Last, [], Data;
    /// UC SEND Last with Immediate.
    UcSendLastImm = 0x23, "UC_SEND_LAST_WITH_IMMEDIATE", Uc, Send, Last, [ImmDt], Data;
    /// UC SEND Only.
    UcSendOnly = 0x24, "UC_SEND_ONLY", Uc, Send, Only, [], Data;
    /// UC SEND Only with Immediate.
    UcSendOnlyImm = 0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", Uc, Send, Only, [ImmDt], Data;
    /// UC RDMA WRITE First.
    UcWriteFirst = 0x26, "UC_RDMA_WRITE_FIRST", Uc, RdmaWrite, First, [Reth], Data;
    /// UC RDMA WRITE Middle.
    UcWriteMiddle = 0x27, "UC_RDMA_WRITE_MIDDLE", Uc, RdmaWrite, Middle, [], Data;
    /// UC RDMA WRITE Last.
    UcWriteLast = 0x28, "UC_RDMA_WRITE_LAST", Uc, RdmaWrite, Last, [], Data;
    /// UC RDMA WRITE Last with Immediate.
    UcWriteLastImm = 0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Uc, RdmaWrite, Last,
        [ImmDt], Data;
    /// UC RDMA WRITE Only.
    UcWriteOnly = 0x2a, "UC_RDMA_WRITE_ONLY", Uc, RdmaWrite, Only, [Reth], Data;
    /// UC RDMA WRITE Only with Immediate.
    UcWriteOnlyImm = 0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Uc, RdmaWrite, Only,
        [Reth, ImmDt], Data;
    /// UD SEND Only.
    UdSendOnly = 0x64, "UD_SEND_ONLY", Ud, Send, Only, [Deth], Data;
    /// UD SEND Only with Immediate.
    UdSendOnlyImm = 0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", Ud, Send, Only, [Deth, ImmDt], Data;
    /// Congestion notification packet.
    Cnp = 0x81, "CNP", Cnp, Cnp, Only, [CnpReserved], None;
}

// The table is consistent: codes round trip, every header fits in
// MAX_HDR_LEN, header lengths are multiples of 4, the transport matches the
// opcode's top bits, and DETH appears exactly on UD opcodes.
const _: () = {
    let mut i = 0;
    while i < Opcode::ALL.len() {
        let op = Opcode::ALL[i];
        let info = op.info();
        assert!(info.opcode as u8 == op as u8);
        assert!(matches!(Opcode::from_u8(op as u8), Some(o) if o as u8 == op as u8));
        assert!(info.hdr_len <= MAX_HDR_LEN && info.hdr_len.is_multiple_of(4));
        let base = match info.transport {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Ud => 0x60,
            Transport::Cnp => 0x80,
        };
        assert!(op as u8 & 0xe0 == base);
        assert!(info.has(Ext::Deth) == matches!(info.transport, Transport::Ud));
        i += 1;
    }
};

impl Opcode {
    /// The opcode's wire value.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The opcode's IBTA name.
    pub const fn name(self) -> &'static str {
        self.info().name
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Base transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bth {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event (SE).
    pub solicited: bool,
    /// Migration request (M).
    pub mig_req: bool,
    /// Pad count, 0..=3. Filled in by the parser; the builder ignores it and
    /// derives the pad from the payload length.
    pub pad: u8,
    /// Transport header version, 4 bits; must be 0.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification (RoCEv2: bit 7 of resv8a).
    pub fecn: bool,
    /// Backward explicit congestion notification (RoCEv2: bit 6 of resv8a).
    pub becn: bool,
    /// The remaining six reserved bits of resv8a; transmitted as 0,
    /// ignored on receive.
    pub resv6a: u8,
    /// Destination QP number, 24 bits.
    pub dest_qpn: u32,
    /// Acknowledge request (A).
    pub ack_req: bool,
    /// Reserved, 7 bits; transmitted as 0, ignored on receive.
    pub resv7: u8,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Bth {
    /// A BTH with the given opcode, P_Key, destination QP and PSN and every
    /// flag clear.
    pub const fn new(opcode: Opcode, pkey: u16, dest_qpn: u32, psn: Psn) -> Self {
        Self {
            opcode,
            solicited: false,
            mig_req: false,
            pad: 0,
            tver: 0,
            pkey,
            fecn: false,
            becn: false,
            resv6a: 0,
            dest_qpn,
            ack_req: false,
            resv7: 0,
            psn,
        }
    }

    /// Decodes a BTH.
    fn decode(b: [u8; BTH_LEN]) -> Result<Self, ParseError> {
        let [op, flags, k0, k1, b4, q0, q1, q2, b8, p0, p1, p2] = b;
        let opcode = Opcode::from_u8(op).ok_or(ParseError::UnknownOpcode(op))?;
        let tver = flags & 0x0f;
        if tver != 0 {
            return Err(ParseError::BadTransportVersion(tver));
        }
        Ok(Self {
            opcode,
            solicited: flags & 0x80 != 0,
            mig_req: flags & 0x40 != 0,
            pad: (flags >> 4) & 0x03,
            tver,
            pkey: u16::from_be_bytes([k0, k1]),
            fecn: b4 & 0x80 != 0,
            becn: b4 & 0x40 != 0,
            resv6a: b4 & 0x3f,
            dest_qpn: u32::from_be_bytes([0, q0, q1, q2]),
            ack_req: b8 & 0x80 != 0,
            resv7: b8 & 0x7f,
            psn: Psn::new(u32::from_be_bytes([0, p0, p1, p2])),
        })
    }

    /// Encodes the BTH with pad count `pad`.
    fn encode(&self, pad: u8) -> Result<[u8; BTH_LEN], BuildError> {
        check_field(self.tver == 0, "bth.tver")?;
        check_field(self.resv6a <= 0x3f, "bth.resv6a")?;
        check_field(self.resv7 <= 0x7f, "bth.resv7")?;
        check_field(self.dest_qpn <= QPN_MASK, "bth.dest_qpn")?;
        let flags = (u8::from(self.solicited) << 7)
            | (u8::from(self.mig_req) << 6)
            | ((pad & 0x03) << 4)
            | self.tver;
        let b4 = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6) | self.resv6a;
        let b8 = (u8::from(self.ack_req) << 7) | self.resv7;
        let [k0, k1] = self.pkey.to_be_bytes();
        let [_, q0, q1, q2] = self.dest_qpn.to_be_bytes();
        let [_, p0, p1, p2] = self.psn.get().to_be_bytes();
        Ok([
            self.opcode.code(),
            flags,
            k0,
            k1,
            b4,
            q0,
            q1,
            q2,
            b8,
            p0,
            p1,
            p2,
        ])
    }
}

/// RDMA extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length of the whole operation.
    pub len: u32,
}

/// NAK codes of an AETH whose syndrome says NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// PSN sequence error (0).
    PsnSequenceError,
    /// Invalid request (1).
    InvalidRequest,
    /// Remote access error (2).
    RemoteAccessError,
    /// Remote operational error (3).
    RemoteOperationalError,
    /// Invalid RD request (4).
    InvalidRdRequest,
}

impl NakCode {
    /// The code's 5-bit value.
    pub const fn value(self) -> u8 {
        match self {
            Self::PsnSequenceError => 0,
            Self::InvalidRequest => 1,
            Self::RemoteAccessError => 2,
            Self::RemoteOperationalError => 3,
            Self::InvalidRdRequest => 4,
        }
    }

    /// The code with 5-bit value `v`, if defined.
    pub const fn from_value(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::PsnSequenceError),
            1 => Some(Self::InvalidRequest),
            2 => Some(Self::RemoteAccessError),
            3 => Some(Self::RemoteOperationalError),
            4 => Some(Self::InvalidRdRequest),
            _ => None,
        }
    }
}

/// The syndrome byte of an AETH, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// ACK with a 5-bit credit count ([`Syndrome::CREDITS_INVALID`]: no
    /// end-to-end credits, rxe's `AETH_ACK_UNLIMITED`).
    Ack {
        /// Credit count encoding, 0..=31.
        credits: u8,
    },
    /// Receiver-not-ready NAK with a 5-bit timer encoding
    /// (see [`rnr_timer_usecs`]).
    RnrNak {
        /// RNR timer encoding, 0..=31.
        timer: u8,
    },
    /// NAK.
    Nak(NakCode),
}

impl Syndrome {
    /// Credit count meaning "no credit information" (all five bits set).
    pub const CREDITS_INVALID: u8 = 0x1f;

    /// Decodes a syndrome byte; `None` for the reserved encodings (bit 7
    /// set, type `0b10`, undefined NAK codes).
    pub const fn from_byte(b: u8) -> Option<Self> {
        let v = b & 0x1f;
        match b >> 5 {
            0 => Some(Self::Ack { credits: v }),
            1 => Some(Self::RnrNak { timer: v }),
            3 => match NakCode::from_value(v) {
                Some(code) => Some(Self::Nak(code)),
                None => None,
            },
            _ => None,
        }
    }

    /// Encodes the syndrome byte; `None` if a credit count or timer does not
    /// fit in 5 bits.
    pub const fn to_byte(self) -> Option<u8> {
        match self {
            Self::Ack { credits } if credits <= 0x1f => Some(credits),
            Self::RnrNak { timer } if timer <= 0x1f => Some(0x20 | timer),
            Self::Nak(code) => Some(0x60 | code.value()),
            _ => None,
        }
    }
}

/// Microseconds an RNR NAK timer encoding stands for (IBTA; the
/// `IB_RNR_TIMER_*` values of `include/rdma/ib_verbs.h`). Only the low five
/// bits of `timer` are used.
pub const fn rnr_timer_usecs(timer: u8) -> u32 {
    const USECS: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    USECS[(timer & 0x1f) as usize]
}

/// ACK extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aeth {
    /// Syndrome: ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

/// Atomic extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicEth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (CmpSwap) or add (FetchAdd) data.
    pub swap_add: u64,
    /// Compare data (CmpSwap).
    pub compare: u64,
}

/// Atomic ACK extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicAckEth {
    /// The original remote data.
    pub orig: u64,
}

/// Immediate data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ImmDt {
    /// The immediate value, read big-endian. The verbs interface carries
    /// it in network byte order (`__be32 imm_data`): convert with
    /// `u32::to_be`/`u32::from_be` there.
    pub imm: u32,
}

/// Invalidate extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ieth {
    /// The R_Key to invalidate.
    pub rkey: u32,
}

/// Datagram extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number, 24 bits (the byte before it is reserved).
    pub src_qpn: u32,
}

/// Flush extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Feth {
    /// Placement type, 4 bits.
    pub placement_type: u8,
    /// Selectivity level, 2 bits.
    pub selectivity: u8,
}

/// The decoded headers of a packet: the BTH and the extension headers its
/// opcode calls for (the others are `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Headers {
    /// Base transport header.
    pub bth: Bth,
    /// RETH, on RDMA WRITE First/Only, READ requests, FLUSH, ATOMIC WRITE.
    pub reth: Option<Reth>,
    /// AETH, on ACKs and READ responses First/Last/Only.
    pub aeth: Option<Aeth>,
    /// AtomicETH, on CmpSwap and FetchAdd.
    pub atomic_eth: Option<AtomicEth>,
    /// AtomicAckETH, on ATOMIC ACKNOWLEDGE.
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// ImmDt, on the "with immediate" opcodes.
    pub imm_dt: Option<ImmDt>,
    /// IETH, on the "with invalidate" opcodes.
    pub ieth: Option<Ieth>,
    /// DETH, on UD opcodes.
    pub deth: Option<Deth>,
    /// FETH, on FLUSH.
    pub feth: Option<Feth>,
}

impl Headers {
    /// Headers with `bth` and no extension headers.
    pub const fn new(bth: Bth) -> Self {
        Self {
            bth,
            reth: None,
            aeth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
            imm_dt: None,
            ieth: None,
            deth: None,
            feth: None,
        }
    }

    /// The opcode's table entry.
    pub const fn info(&self) -> &'static OpInfo {
        self.bth.opcode.info()
    }

    /// Whether extension header `ext` is present.
    pub const fn has(&self, ext: Ext) -> bool {
        match ext {
            Ext::Reth => self.reth.is_some(),
            Ext::Aeth => self.aeth.is_some(),
            Ext::AtomicEth => self.atomic_eth.is_some(),
            Ext::AtomicAckEth => self.atomic_ack_eth.is_some(),
            Ext::ImmDt => self.imm_dt.is_some(),
            Ext::Ieth => self.ieth.is_some(),
            Ext::Deth => self.deth.is_some(),
            Ext::Feth => self.feth.is_some(),
            // Carries nothing; required by CNPs only.
            Ext::CnpReserved => matches!(self.bth.opcode, Opcode::Cnp),
        }
    }
}

/// Why [`parse`] rejected a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the headers its opcode calls for plus the ICRC.
    TooShort {
        /// Length of the buffer.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// Reserved or unsupported opcode.
    UnknownOpcode(u8),
    /// Transport header version other than 0.
    BadTransportVersion(u8),
    /// Payload plus pad is not a multiple of 4 bytes.
    Misaligned {
        /// Bytes between the headers and the ICRC.
        len: usize,
    },
    /// Pad count larger than the bytes between the headers and the ICRC.
    BadPadCount {
        /// Pad count from the BTH.
        pad: u8,
        /// Bytes between the headers and the ICRC.
        len: usize,
    },
    /// Payload on an opcode that carries none.
    UnexpectedPayload {
        /// The opcode.
        opcode: Opcode,
        /// Payload plus pad length.
        len: usize,
    },
    /// Payload of the wrong size for an opcode with a fixed payload size.
    BadPayloadLength {
        /// The opcode.
        opcode: Opcode,
        /// Payload length.
        len: usize,
        /// The size the opcode requires.
        expected: usize,
    },
    /// Payload size breaks the path MTU rules for the packet's position.
    MtuViolation {
        /// The opcode.
        opcode: Opcode,
        /// Payload length.
        len: usize,
        /// Path MTU.
        mtu: u32,
    },
    /// Reserved AETH syndrome.
    BadSyndrome(u8),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len, needed } => {
                write!(f, "packet too short: {len} bytes, need {needed}")
            }
            Self::UnknownOpcode(op) => write!(f, "unknown opcode {op:#04x}"),
            Self::BadTransportVersion(v) => write!(f, "transport header version {v}"),
            Self::Misaligned { len } => {
                write!(f, "payload + pad of {len} bytes is not a multiple of 4")
            }
            Self::BadPadCount { pad, len } => {
                write!(
                    f,
                    "pad count {pad} exceeds the {len} bytes after the headers"
                )
            }
            Self::UnexpectedPayload { opcode, len } => {
                write!(f, "{opcode} carries {len} bytes of payload, it takes none")
            }
            Self::BadPayloadLength {
                opcode,
                len,
                expected,
            } => write!(f, "{opcode} payload is {len} bytes, must be {expected}"),
            Self::MtuViolation { opcode, len, mtu } => {
                write!(f, "{opcode} payload of {len} bytes breaks path MTU {mtu}")
            }
            Self::BadSyndrome(s) => write!(f, "reserved AETH syndrome {s:#04x}"),
        }
    }
}

/// Why [`build`] or [`build_headers`] refused to write a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Length of the buffer.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// The opcode calls for an extension header that is `None`.
    MissingHeader(Ext),
    /// An extension header is set that the opcode does not carry.
    UnexpectedHeader(Ext),
    /// A field does not fit its wire width, or is a reserved encoding.
    FieldOutOfRange(&'static str),
    /// Payload on an opcode that carries none.
    UnexpectedPayload {
        /// Payload length.
        len: usize,
    },
    /// Payload of the wrong size for an opcode with a fixed payload size.
    BadPayloadLength {
        /// Payload length.
        len: usize,
        /// The size the opcode requires.
        expected: usize,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BufferTooSmall { len, needed } => {
                write!(f, "buffer of {len} bytes too small, need {needed}")
            }
            Self::MissingHeader(ext) => write!(f, "opcode requires {}", ext.name()),
            Self::UnexpectedHeader(ext) => write!(f, "opcode does not carry {}", ext.name()),
            Self::FieldOutOfRange(field) => write!(f, "{field} out of range"),
            Self::UnexpectedPayload { len } => {
                write!(f, "{len} bytes of payload on an opcode that takes none")
            }
            Self::BadPayloadLength { len, expected } => {
                write!(f, "payload is {len} bytes, must be {expected}")
            }
        }
    }
}

/// Returns `FieldOutOfRange(name)` unless `ok`.
fn check_field(ok: bool, name: &'static str) -> Result<(), BuildError> {
    if ok {
        Ok(())
    } else {
        Err(BuildError::FieldOutOfRange(name))
    }
}

/// Reads fixed-size fields off the front of a byte slice.
struct Reader<'a> {
    buf: &'a [u8],
    /// Returned if the slice runs out (cannot happen once the header length
    /// has been checked against the opcode table).
    short: ParseError,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ParseError> {
        let (head, rest) = self.buf.split_first_chunk::<N>().ok_or(self.short)?;
        self.buf = rest;
        Ok(*head)
    }

    fn u32(&mut self) -> Result<u32, ParseError> {
        self.take().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, ParseError> {
        self.take().map(u64::from_be_bytes)
    }

    /// Reads `[reserved byte, 24-bit value]`, returning the value.
    fn u24_after_reserved(&mut self) -> Result<u32, ParseError> {
        let [_, a, b, c] = self.take::<4>()?;
        Ok(u32::from_be_bytes([0, a, b, c]))
    }
}

/// Writes fixed-size fields to the front of a byte slice.
struct Writer<'a> {
    buf: &'a mut [u8],
    /// Returned if the slice runs out (cannot happen once the total length
    /// has been checked).
    short: BuildError,
}

impl Writer<'_> {
    fn put<const N: usize>(&mut self, bytes: [u8; N]) -> Result<(), BuildError> {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf.split_first_chunk_mut::<N>().ok_or(self.short)?;
        *head = bytes;
        self.buf = rest;
        Ok(())
    }

    fn put_slice(&mut self, bytes: &[u8]) -> Result<(), BuildError> {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf.split_at_mut_checked(bytes.len()).ok_or(self.short)?;
        head.copy_from_slice(bytes);
        self.buf = rest;
        Ok(())
    }

    fn zeros(&mut self, n: usize) -> Result<(), BuildError> {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf.split_at_mut_checked(n).ok_or(self.short)?;
        head.fill(0);
        self.buf = rest;
        Ok(())
    }

    fn u32(&mut self, v: u32) -> Result<(), BuildError> {
        self.put(v.to_be_bytes())
    }

    fn u64(&mut self, v: u64) -> Result<(), BuildError> {
        self.put(v.to_be_bytes())
    }

    /// Writes a zero reserved byte followed by the 24-bit `v`.
    fn u24_after_reserved(&mut self, v: u32, name: &'static str) -> Result<(), BuildError> {
        check_field(v <= QPN_MASK, name)?;
        self.u32(v)
    }
}

/// Decodes extension header `ext` into `h`.
fn decode_ext(ext: Ext, r: &mut Reader<'_>, h: &mut Headers) -> Result<(), ParseError> {
    match ext {
        Ext::Reth => {
            h.reth = Some(Reth {
                va: r.u64()?,
                rkey: r.u32()?,
                len: r.u32()?,
            });
        }
        Ext::Aeth => {
            let [syn, m0, m1, m2] = r.take::<4>()?;
            let syndrome = Syndrome::from_byte(syn).ok_or(ParseError::BadSyndrome(syn))?;
            h.aeth = Some(Aeth {
                syndrome,
                msn: u32::from_be_bytes([0, m0, m1, m2]),
            });
        }
        Ext::AtomicEth => {
            h.atomic_eth = Some(AtomicEth {
                va: r.u64()?,
                rkey: r.u32()?,
                swap_add: r.u64()?,
                compare: r.u64()?,
            });
        }
        Ext::AtomicAckEth => h.atomic_ack_eth = Some(AtomicAckEth { orig: r.u64()? }),
        Ext::ImmDt => h.imm_dt = Some(ImmDt { imm: r.u32()? }),
        Ext::Ieth => h.ieth = Some(Ieth { rkey: r.u32()? }),
        Ext::Deth => {
            h.deth = Some(Deth {
                qkey: r.u32()?,
                src_qpn: r.u24_after_reserved()?,
            });
        }
        Ext::Feth => {
            let [_, _, _, bits] = r.take::<4>()?;
            h.feth = Some(Feth {
                placement_type: bits & 0x0f,
                selectivity: (bits >> 4) & 0x03,
            });
        }
        Ext::CnpReserved => {
            r.take::<CNP_RSVD_LEN>()?;
        }
    }
    Ok(())
}

/// Encodes extension header `ext` from `h`.
fn encode_ext(ext: Ext, h: &Headers, w: &mut Writer<'_>) -> Result<(), BuildError> {
    let missing = BuildError::MissingHeader(ext);
    match ext {
        Ext::Reth => {
            let reth = h.reth.ok_or(missing)?;
            w.u64(reth.va)?;
            w.u32(reth.rkey)?;
            w.u32(reth.len)
        }
        Ext::Aeth => {
            let aeth = h.aeth.ok_or(missing)?;
            let syn = aeth
                .syndrome
                .to_byte()
                .ok_or(BuildError::FieldOutOfRange("aeth.syndrome"))?;
            check_field(aeth.msn <= QPN_MASK, "aeth.msn")?;
            let [_, m0, m1, m2] = aeth.msn.to_be_bytes();
            w.put([syn, m0, m1, m2])
        }
        Ext::AtomicEth => {
            let a = h.atomic_eth.ok_or(missing)?;
            w.u64(a.va)?;
            w.u32(a.rkey)?;
            w.u64(a.swap_add)?;
            w.u64(a.compare)
        }
        Ext::AtomicAckEth => w.u64(h.atomic_ack_eth.ok_or(missing)?.orig),
        Ext::ImmDt => w.u32(h.imm_dt.ok_or(missing)?.imm),
        Ext::Ieth => w.u32(h.ieth.ok_or(missing)?.rkey),
        Ext::Deth => {
            let deth = h.deth.ok_or(missing)?;
            w.u32(deth.qkey)?;
            w.u24_after_reserved(deth.src_qpn, "deth.src_qpn")
        }
        Ext::Feth => {
            let feth = h.feth.ok_or(missing)?;
            check_field(feth.placement_type <= 0x0f, "feth.placement_type")?;
            check_field(feth.selectivity <= 0x03, "feth.selectivity")?;
            w.put([0, 0, 0, (feth.selectivity << 4) | feth.placement_type])
        }
        Ext::CnpReserved => w.zeros(CNP_RSVD_LEN),
    }
}

/// Every optional extension header, for checking that no stray one is set.
const OPTIONAL_EXTS: [Ext; 8] = [
    Ext::Reth,
    Ext::Aeth,
    Ext::AtomicEth,
    Ext::AtomicAckEth,
    Ext::ImmDt,
    Ext::Ieth,
    Ext::Deth,
    Ext::Feth,
];

/// Number of pad bytes that bring `payload_len` to a multiple of 4.
pub const fn pad_len(payload_len: usize) -> usize {
    match payload_len % 4 {
        0 => 0,
        r => 4 - r,
    }
}

/// Length of the UDP payload (headers, payload, pad and ICRC) of a packet
/// with opcode `opcode` and `payload_len` bytes of payload, or `None` if that
/// overflows.
pub const fn packet_len(opcode: Opcode, payload_len: usize) -> Option<usize> {
    let fixed = opcode.info().hdr_len + ICRC_LEN;
    match payload_len.checked_add(pad_len(payload_len)) {
        Some(padded) => padded.checked_add(fixed),
        None => None,
    }
}

/// A received packet, validated by [`parse`]. Borrows the buffer it was
/// parsed from; nothing is copied but the (small) decoded headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    headers: Headers,
    header_bytes: &'a [u8],
    payload: &'a [u8],
    pad: &'a [u8],
    icrc: [u8; ICRC_LEN],
}

impl<'a> Packet<'a> {
    /// The decoded headers.
    pub const fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The base transport header.
    pub const fn bth(&self) -> &Bth {
        &self.headers.bth
    }

    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        self.headers.bth.opcode
    }

    /// The opcode's table entry.
    pub const fn info(&self) -> &'static OpInfo {
        self.headers.bth.opcode.info()
    }

    /// The PSN.
    pub const fn psn(&self) -> Psn {
        self.headers.bth.psn
    }

    /// The raw BTH and extension headers.
    pub const fn header_bytes(&self) -> &'a [u8] {
        self.header_bytes
    }

    /// The payload, without pad.
    pub const fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The pad bytes between the payload and the ICRC.
    pub const fn pad_bytes(&self) -> &'a [u8] {
        self.pad
    }

    /// The ICRC as stored in the trailer, read least significant byte first
    /// as rxe does, so it compares equal to [`super::icrc::compute`]'s result.
    pub const fn icrc(&self) -> u32 {
        u32::from_le_bytes(self.icrc)
    }

    /// The four trailer bytes as they are on the wire.
    pub const fn icrc_bytes(&self) -> [u8; ICRC_LEN] {
        self.icrc
    }

    /// Length of the whole packet (the UDP payload).
    pub const fn wire_len(&self) -> usize {
        self.header_bytes.len() + self.payload.len() + self.pad.len() + ICRC_LEN
    }
}

/// Checks the payload length against the opcode's payload rule and, if
/// known, the path MTU.
fn check_payload(
    info: &OpInfo,
    len: usize,
    padded: usize,
    path_mtu: Option<u32>,
) -> Result<(), ParseError> {
    let opcode = info.opcode;
    match info.payload {
        PayloadRule::None if padded != 0 => Err(ParseError::UnexpectedPayload {
            opcode,
            len: padded,
        }),
        PayloadRule::Exactly(expected) if len != expected => Err(ParseError::BadPayloadLength {
            opcode,
            len,
            expected,
        }),
        PayloadRule::Data => match path_mtu {
            Some(mtu) => check_mtu(info, len, mtu),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Checks a data payload against the path MTU rules of its position (as
/// rxe's `check_length()`).
fn check_mtu(info: &OpInfo, len: usize, mtu: u32) -> Result<(), ParseError> {
    let max = usize::try_from(mtu).unwrap_or(usize::MAX);
    let ok = match info.position {
        Position::First | Position::Middle => len == max,
        Position::Last => len != 0 && len <= max,
        Position::Only => len <= max,
    };
    if ok {
        Ok(())
    } else {
        Err(ParseError::MtuViolation {
            opcode: info.opcode,
            len,
            mtu,
        })
    }
}

/// Parses and validates a RoCEv2 packet.
///
/// `buf` is the UDP payload: it starts at the BTH and ends after the ICRC.
/// With `path_mtu`, data payloads are also checked against the path MTU
/// (first and middle packets exactly one MTU, last packets 1 to MTU bytes,
/// only packets at most one MTU); pass `None` where it is not known.
///
/// The ICRC itself is not checked here; see [`super::icrc::verify`].
pub fn parse(buf: &[u8], path_mtu: Option<u32>) -> Result<Packet<'_>, ParseError> {
    let len = buf.len();
    let too_short = |needed| ParseError::TooShort { len, needed };
    let (body, icrc) = buf
        .split_last_chunk::<ICRC_LEN>()
        .ok_or(too_short(BTH_LEN + ICRC_LEN))?;
    let bth_bytes = body
        .first_chunk::<BTH_LEN>()
        .ok_or(too_short(BTH_LEN + ICRC_LEN))?;
    let bth = Bth::decode(*bth_bytes)?;
    let info = bth.opcode.info();
    let short = too_short(info.hdr_len + ICRC_LEN);
    let (header_bytes, data) = body.split_at_checked(info.hdr_len).ok_or(short)?;

    let mut headers = Headers::new(bth);
    let mut r = Reader {
        buf: header_bytes.get(BTH_LEN..).ok_or(short)?,
        short,
    };
    for &ext in info.exts {
        decode_ext(ext, &mut r, &mut headers)?;
    }

    if !data.len().is_multiple_of(4) {
        return Err(ParseError::Misaligned { len: data.len() });
    }
    let payload_len =
        data.len()
            .checked_sub(usize::from(bth.pad))
            .ok_or(ParseError::BadPadCount {
                pad: bth.pad,
                len: data.len(),
            })?;
    check_payload(info, payload_len, data.len(), path_mtu)?;
    let (payload, pad) = data.split_at_checked(payload_len).ok_or(short)?;

    Ok(Packet {
        headers,
        header_bytes,
        payload,
        pad,
        icrc: *icrc,
    })
}

/// Checks that `h` carries exactly the extension headers of its opcode and
/// that `payload_len` suits the opcode.
fn check_build(h: &Headers, payload_len: usize) -> Result<(), BuildError> {
    let info = h.info();
    for ext in OPTIONAL_EXTS {
        match (info.has(ext), h.has(ext)) {
            (true, false) => return Err(BuildError::MissingHeader(ext)),
            (false, true) => return Err(BuildError::UnexpectedHeader(ext)),
            _ => {}
        }
    }
    match info.payload {
        PayloadRule::None if payload_len != 0 => {
            Err(BuildError::UnexpectedPayload { len: payload_len })
        }
        PayloadRule::Exactly(expected) if payload_len != expected => {
            Err(BuildError::BadPayloadLength {
                len: payload_len,
                expected,
            })
        }
        _ => Ok(()),
    }
}

/// Writes the BTH and extension headers of `h` for a packet carrying
/// `payload_len` bytes of payload to the start of `buf`, and returns how
/// many bytes that took (`h`'s opcode's `hdr_len`).
///
/// The BTH pad count is derived from `payload_len` (`h.bth.pad` is
/// ignored); the caller appends the payload, [`pad_len`] zero bytes and the
/// ICRC. Reserved fields are written as zero.
pub fn build_headers(h: &Headers, payload_len: usize, buf: &mut [u8]) -> Result<usize, BuildError> {
    check_build(h, payload_len)?;
    write_headers(h, payload_len, buf)
}

/// [`build_headers`] without the consistency checks of [`check_build`].
fn write_headers(h: &Headers, payload_len: usize, buf: &mut [u8]) -> Result<usize, BuildError> {
    let info = h.info();
    let short = BuildError::BufferTooSmall {
        len: buf.len(),
        needed: info.hdr_len,
    };
    let mut w = Writer { buf, short };
    let pad = match pad_len(payload_len) {
        1 => 1,
        2 => 2,
        3 => 3,
        _ => 0,
    };
    w.put(h.bth.encode(pad)?)?;
    for &ext in info.exts {
        encode_ext(ext, h, &mut w)?;
    }
    Ok(info.hdr_len)
}

/// Writes a whole packet to the start of `buf`: headers, `payload`, zeroed
/// pad and a zeroed ICRC trailer for [`super::icrc::generate`] to fill in.
/// Returns the packet's length (the UDP payload length).
pub fn build(h: &Headers, payload: &[u8], buf: &mut [u8]) -> Result<usize, BuildError> {
    let len = buf.len();
    let total = packet_len(h.bth.opcode, payload.len()).ok_or(BuildError::BufferTooSmall {
        len,
        needed: usize::MAX,
    })?;
    // Validate the headers before reporting a short buffer, so callers see
    // the more fundamental error first.
    check_build(h, payload.len())?;
    let short = BuildError::BufferTooSmall { len, needed: total };
    let out = buf.get_mut(..total).ok_or(short)?;
    let (hdr, rest) = out.split_at_mut_checked(h.info().hdr_len).ok_or(short)?;
    write_headers(h, payload.len(), hdr)?;
    let mut w = Writer { buf: rest, short };
    w.put_slice(payload)?;
    w.zeros(pad_len(payload.len()))?;
    w.zeros(ICRC_LEN)?;
    Ok(total)
}

/// Deterministic, allocation-free checks of the codec, shared by the host
/// tests and KUnit.
pub mod selftest {
    use super::*;

    /// Fails with `msg` unless `cond` holds.
    fn check(cond: bool, msg: &'static str) -> Result<(), &'static str> {
        if cond {
            Ok(())
        } else {
            Err(msg)
        }
    }

    /// Headers for `opcode` with every extension header it needs, filled
    /// with recognisable values.
    pub fn sample_headers(opcode: Opcode, seed: u32) -> Headers {
        let s = u64::from(seed);
        let mut bth = Bth::new(
            opcode,
            0xffff,
            0x12_3456 ^ (seed & QPN_MASK),
            Psn::new(seed),
        );
        bth.solicited = seed & 1 != 0;
        bth.ack_req = seed & 2 != 0;
        bth.mig_req = seed & 4 != 0;
        bth.fecn = seed & 8 != 0;
        bth.becn = seed & 16 != 0;
        let info = opcode.info();
        let mut h = Headers::new(bth);
        if info.has(Ext::Reth) {
            h.reth = Some(Reth {
                va: 0x0000_7fff_dead_b000 ^ s,
                rkey: 0x1234_5678 ^ seed,
                len: 4096 ^ seed,
            });
        }
        if info.has(Ext::Aeth) {
            let syndrome = match seed % 3 {
                0 => Syndrome::Ack {
                    credits: Syndrome::CREDITS_INVALID,
                },
                1 => Syndrome::RnrNak { timer: 14 },
                _ => Syndrome::Nak(NakCode::RemoteAccessError),
            };
            h.aeth = Some(Aeth {
                syndrome,
                msn: seed & QPN_MASK,
            });
        }
        if info.has(Ext::AtomicEth) {
            h.atomic_eth = Some(AtomicEth {
                va: 0x1000 ^ s,
                rkey: 0xabcd ^ seed,
                swap_add: 0x0102_0304_0506_0708 ^ s,
                compare: 0x1112_1314_1516_1718 ^ s,
            });
        }
        if info.has(Ext::AtomicAckEth) {
            h.atomic_ack_eth = Some(AtomicAckEth {
                orig: 0xfeed_face_cafe_beef ^ s,
            });
        }
        if info.has(Ext::ImmDt) {
            h.imm_dt = Some(ImmDt {
                imm: 0xc0ff_ee00 ^ seed,
            });
        }
        if info.has(Ext::Ieth) {
            h.ieth = Some(Ieth {
                rkey: 0x5555_aaaa ^ seed,
            });
        }
        if info.has(Ext::Deth) {
            h.deth = Some(Deth {
                qkey: GSI_QKEY ^ seed,
                src_qpn: 1 ^ (seed & QPN_MASK),
            });
        }
        if info.has(Ext::Feth) {
            h.feth = Some(Feth {
                placement_type: 1,
                selectivity: 2,
            });
        }
        h
    }

    /// A payload length valid for `opcode` under `mtu`.
    pub fn sample_payload_len(opcode: Opcode, mtu: usize) -> usize {
        let info = opcode.info();
        match info.payload {
            PayloadRule::None => 0,
            PayloadRule::Exactly(n) => n,
            PayloadRule::Data => match info.position {
                Position::First | Position::Middle => mtu,
                Position::Last => 1,
                Position::Only => 13,
            },
        }
    }

    /// Builds a packet for every opcode and parses it back to the same
    /// headers and payload.
    pub fn round_trip_all_opcodes() -> Result<(), &'static str> {
        const MTU: usize = 256;
        let mut payload = [0u8; MTU];
        for (i, b) in payload.iter_mut().enumerate() {
            *b = i.to_le_bytes().first().copied().unwrap_or(0);
        }
        let mut buf = [0u8; MAX_HDR_LEN + MTU + 8];
        for (seed, &op) in (1u32..).zip(Opcode::ALL) {
            let mut h = sample_headers(op, seed.wrapping_mul(0x9e37_79b9));
            let n = sample_payload_len(op, MTU);
            let data = payload.get(..n).ok_or("payload")?;
            h.bth.pad = u8::try_from(pad_len(n)).map_err(|_| "pad")?;
            let len = build(&h, data, &mut buf).map_err(|_| "build failed")?;
            check(packet_len(op, n) == Some(len), "packet_len")?;
            let wire = buf.get(..len).ok_or("length")?;
            let p = parse(wire, Some(256)).map_err(|_| "parse of built packet failed")?;
            check(*p.headers() == h, "headers differ after round trip")?;
            check(p.payload() == data, "payload differs after round trip")?;
            check(p.wire_len() == len, "wire_len")?;
            check(p.header_bytes().len() == op.info().hdr_len, "hdr_len")?;
            check(p.pad_bytes().iter().all(|&b| b == 0), "pad not zero")?;
            check(Opcode::from_u8(op.code()) == Some(op), "from_u8")?;
        }
        Ok(())
    }

    /// Header lengths of every opcode agree with rxe's `rxe_opcode[]`.
    pub fn header_lengths() -> Result<(), &'static str> {
        const RXE: [(u8, usize); 39] = [
            (0x00, 12),
            (0x01, 12),
            (0x02, 12),
            (0x03, 16),
            (0x04, 12),
            (0x05, 16),
            (0x06, 28),
            (0x07, 12),
            (0x08, 12),
            (0x09, 16),
            (0x0a, 28),
            (0x0b, 32),
            (0x0c, 28),
            (0x0d, 16),
            (0x0e, 12),
            (0x0f, 16),
            (0x10, 16),
            (0x11, 16),
            (0x12, 24),
            (0x13, 40),
            (0x14, 40),
            (0x16, 16),
            (0x17, 16),
            (0x1c, 32),
            (0x1d, 28),
            (0x20, 12),
            (0x21, 12),
            (0x22, 12),
            (0x23, 16),
            (0x24, 12),
            (0x25, 16),
            (0x26, 28),
            (0x27, 12),
            (0x28, 12),
            (0x29, 16),
            (0x2a, 28),
            (0x2b, 32),
            (0x64, 20),
            (0x65, 24),
        ];
        for (code, len) in RXE {
            let op = Opcode::from_u8(code).ok_or("rxe opcode missing from the table")?;
            check(op.info().hdr_len == len, "header length differs from rxe")?;
        }
        check(Opcode::ALL.len() == RXE.len() + 1, "table size (rxe + CNP)")?;
        // Reserved, RD and manufacturer-specific opcodes are refused.
        for code in [
            0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x40, 0x44, 0x66, 0x80, 0xe0, 0xff,
        ] {
            check(Opcode::from_u8(code).is_none(), "reserved opcode accepted")?;
        }
        Ok(())
    }

    /// A hand-assembled RC RDMA WRITE ONLY with immediate decodes to the
    /// expected fields (bit positions of every BTH flag included).
    pub fn decode_known_packet() -> Result<(), &'static str> {
        #[rustfmt::skip]
        const PKT: [u8; 44] = [
            0x0b, 0xf0, 0x80, 0x01, 0xbf, 0x00, 0x01, 0x23, 0xff, 0xff, 0xff, 0xfe,
            0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x78, 0xde, 0xad, 0xbe, 0xef,
            0x00, 0x00, 0x00, 0x05, 0xca, 0xfe, 0xf0, 0x0d, b'h', b'e', b'l', b'l',
            b'o', 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44,
        ];
        let p = parse(&PKT, Some(1024)).map_err(|_| "parse failed")?;
        let b = p.bth();
        check(p.opcode() == Opcode::RcWriteOnlyImm, "opcode")?;
        check(
            b.solicited && b.mig_req && b.pad == 3 && b.tver == 0,
            "flags",
        )?;
        check(b.pkey == 0x8001, "pkey")?;
        check(b.fecn && !b.becn && b.resv6a == 0x3f, "resv8a")?;
        check(b.dest_qpn == 0x123, "qpn")?;
        check(b.ack_req && b.resv7 == 0x7f, "ack req")?;
        check(b.psn == Psn::new(0xff_fffe), "psn")?;
        let reth = p.headers().reth.ok_or("reth")?;
        check(reth.va == 0x7f00_1234_5678, "va")?;
        check(reth.rkey == 0xdead_beef && reth.len == 5, "rkey/len")?;
        check(
            p.headers().imm_dt == Some(ImmDt { imm: 0xcafe_f00d }),
            "imm",
        )?;
        check(p.payload() == b"hello", "payload")?;
        check(p.icrc_bytes() == [0x11, 0x22, 0x33, 0x44], "icrc bytes")?;
        check(p.icrc() == 0x4433_2211, "icrc value")
    }

    /// AETH syndromes decode per IBTA, reserved ones are refused.
    pub fn aeth_syndromes() -> Result<(), &'static str> {
        check(
            Syndrome::from_byte(0x1f) == Some(Syndrome::Ack { credits: 0x1f }),
            "ACK",
        )?;
        check(
            Syndrome::from_byte(0x2e) == Some(Syndrome::RnrNak { timer: 14 }),
            "RNR NAK",
        )?;
        check(
            Syndrome::from_byte(0x60) == Some(Syndrome::Nak(NakCode::PsnSequenceError)),
            "NAK PSN",
        )?;
        check(
            Syndrome::from_byte(0x63) == Some(Syndrome::Nak(NakCode::RemoteOperationalError)),
            "NAK remote op",
        )?;
        check(
            Syndrome::from_byte(0x64) == Some(Syndrome::Nak(NakCode::InvalidRdRequest)),
            "NAK RD",
        )?;
        for reserved in [0x40, 0x5f, 0x65, 0x7f, 0x80, 0xff] {
            check(Syndrome::from_byte(reserved).is_none(), "reserved syndrome")?;
        }
        for b in 0..=0x7f_u8 {
            if let Some(s) = Syndrome::from_byte(b) {
                check(s.to_byte() == Some(b), "syndrome round trip")?;
            }
        }
        check(Syndrome::Ack { credits: 32 }.to_byte().is_none(), "credits")?;
        check(rnr_timer_usecs(0) == 655_360, "RNR timer 0")?;
        check(rnr_timer_usecs(14) == 1_280, "RNR timer 14")?;
        check(rnr_timer_usecs(31) == 491_520, "RNR timer 31")?;
        let mut ack = [0u8; 20];
        let h = sample_headers(Opcode::RcAck, 0);
        build(&h, &[], &mut ack).map_err(|_| "build ACK")?;
        if let Some(syn) = ack.get_mut(BTH_LEN) {
            *syn = 0x41;
        }
        check(
            parse(&ack, None) == Err(ParseError::BadSyndrome(0x41)),
            "reserved syndrome parsed",
        )
    }

    /// Malformed packets are refused with the right error.
    pub fn rejects_malformed() -> Result<(), &'static str> {
        // RC SEND ONLY, 5 bytes payload, pad 3.
        let mut buf = [0u8; 64];
        let h = sample_headers(Opcode::RcSendOnly, 0);
        let len = build(&h, b"abcde", &mut buf).map_err(|_| "build")?;
        check(len == 12 + 8 + 4, "length")?;
        let good = buf;
        let pkt = |b: &[u8; 64], n: usize| -> Result<(), ParseError> {
            parse(b.get(..n).unwrap_or(&[]), None).map(|_| ())
        };
        check(pkt(&good, len).is_ok(), "good packet")?;
        for n in 0..16 {
            check(
                matches!(pkt(&good, n), Err(ParseError::TooShort { .. })),
                "short packet",
            )?;
        }
        check(
            matches!(pkt(&good, len - 1), Err(ParseError::Misaligned { .. })),
            "misaligned",
        )?;

        let mut b = good;
        b[0] = 0x15;
        check(
            pkt(&b, len) == Err(ParseError::UnknownOpcode(0x15)),
            "reserved opcode",
        )?;
        b[0] = 0x44;
        check(
            pkt(&b, len) == Err(ParseError::UnknownOpcode(0x44)),
            "RD opcode",
        )?;

        let mut b = good;
        b[1] |= 0x01;
        check(
            pkt(&b, len) == Err(ParseError::BadTransportVersion(1)),
            "tver",
        )?;

        // Pad 3 but only the ICRC after the headers: pad exceeds the data.
        let mut b = good;
        b[1] = 0x30;
        check(
            matches!(pkt(&b, 16), Err(ParseError::BadPadCount { pad: 3, len: 0 })),
            "pad count",
        )?;

        // An ACK with payload.
        let h = sample_headers(Opcode::RcAck, 0);
        let n = build(&h, &[], &mut b).map_err(|_| "build ack")?;
        check(pkt(&b, n).is_ok(), "good ack")?;
        check(
            matches!(
                pkt(&b, n + 4),
                Err(ParseError::UnexpectedPayload { len: 4, .. })
            ),
            "ACK with payload",
        )?;

        // ATOMIC WRITE must carry exactly 8 bytes.
        let h = sample_headers(Opcode::RcAtomicWrite, 0);
        let n = build(&h, &[7; 8], &mut b).map_err(|_| "build atomic write")?;
        check(pkt(&b, n).is_ok(), "good atomic write")?;
        check(
            matches!(
                pkt(&b, n + 4),
                Err(ParseError::BadPayloadLength {
                    len: 12,
                    expected: 8,
                    ..
                })
            ),
            "atomic write payload",
        )?;
        check(
            build(&h, &[7; 4], &mut b)
                == Err(BuildError::BadPayloadLength {
                    len: 4,
                    expected: 8,
                }),
            "builder refuses short atomic write",
        )?;
        Ok(())
    }

    /// Path MTU rules for first, middle, last and only packets.
    pub fn mtu_rules() -> Result<(), &'static str> {
        let mut buf = [0u8; 600];
        let payload = [0xa5u8; 512];
        let cases: [(Opcode, usize, bool); 12] = [
            (Opcode::RcSendFirst, 256, true),
            (Opcode::RcSendFirst, 252, false),
            (Opcode::RcSendMiddle, 256, true),
            (Opcode::RcWriteMiddle, 260, false),
            (Opcode::RcSendLast, 1, true),
            (Opcode::RcSendLast, 256, true),
            (Opcode::RcSendLast, 0, false),
            (Opcode::RcReadResponseLast, 260, false),
            (Opcode::RcSendOnly, 0, true),
            (Opcode::UdSendOnly, 256, true),
            (Opcode::UdSendOnly, 257, false),
            (Opcode::UcWriteOnlyImm, 512, false),
        ];
        for (op, n, ok) in cases {
            let h = sample_headers(op, 3);
            let data = payload.get(..n).ok_or("payload")?;
            let len = build(&h, data, &mut buf).map_err(|_| "build")?;
            let wire = buf.get(..len).ok_or("len")?;
            check(parse(wire, None).is_ok(), "MTU unknown: accepted")?;
            let r = parse(wire, Some(256));
            check(r.is_ok() == ok, "MTU rule")?;
            if !ok {
                check(
                    matches!(r, Err(ParseError::MtuViolation { mtu: 256, .. })),
                    "MTU error kind",
                )?;
            }
        }
        Ok(())
    }

    /// The builder refuses inconsistent headers and short buffers.
    pub fn builder_rejects() -> Result<(), &'static str> {
        let mut buf = [0u8; 64];
        let mut h = sample_headers(Opcode::RcWriteOnly, 0);
        h.reth = None;
        check(
            build(&h, b"x", &mut buf) == Err(BuildError::MissingHeader(Ext::Reth)),
            "missing RETH",
        )?;
        let mut h = sample_headers(Opcode::RcSendOnly, 0);
        h.deth = Some(Deth::default());
        check(
            build(&h, b"x", &mut buf) == Err(BuildError::UnexpectedHeader(Ext::Deth)),
            "DETH on RC",
        )?;
        let mut h = sample_headers(Opcode::RcSendOnly, 0);
        h.bth.dest_qpn = 1 << 24;
        check(
            build(&h, b"x", &mut buf) == Err(BuildError::FieldOutOfRange("bth.dest_qpn")),
            "QPN range",
        )?;
        h.bth.dest_qpn = 1;
        h.bth.tver = 1;
        check(
            build(&h, b"x", &mut buf) == Err(BuildError::FieldOutOfRange("bth.tver")),
            "tver",
        )?;
        let h = sample_headers(Opcode::RcReadRequest, 0);
        check(
            build(&h, b"x", &mut buf) == Err(BuildError::UnexpectedPayload { len: 1 }),
            "payload on READ request",
        )?;
        let h = sample_headers(Opcode::RcSendOnly, 0);
        for n in 0..20 {
            let short = buf.get_mut(..n).ok_or("len")?;
            check(
                build(&h, b"x", short) == Err(BuildError::BufferTooSmall { len: n, needed: 20 }),
                "short buffer",
            )?;
        }
        check(
            build_headers(&h, 1, &mut buf) == Ok(BTH_LEN),
            "build_headers returns hdr_len",
        )?;
        check(
            buf.get(1).copied() == Some(0x30),
            "pad count derived from the payload length",
        )
    }

    /// The packets of the ICRC known-answer vectors parse (the CNP too) and
    /// their trailers are the ICRC.
    pub fn parses_icrc_vectors() -> Result<(), &'static str> {
        for (_name, ip_packet) in super::super::icrc::selftest::VECTORS {
            let v6 = ip_packet.first().is_some_and(|b| b >> 4 == 6);
            let udp_payload = ip_packet.get(if v6 { 48 } else { 28 }..).ok_or("short")?;
            let p = parse(udp_payload, Some(1024)).map_err(|_| "vector does not parse")?;
            let (covered, _) = ip_packet.split_last_chunk::<4>().ok_or("short")?;
            let computed = super::super::icrc::compute(covered).map_err(|_| "icrc")?;
            check(p.icrc() == computed, "trailer is not the ICRC")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn selftests() {
        selftest::round_trip_all_opcodes().unwrap();
        selftest::header_lengths().unwrap();
        selftest::decode_known_packet().unwrap();
        selftest::aeth_syndromes().unwrap();
        selftest::rejects_malformed().unwrap();
        selftest::mtu_rules().unwrap();
        selftest::builder_rejects().unwrap();
        selftest::parses_icrc_vectors().unwrap();
    }

    #[test]
    fn display() {
        assert_eq!(
            Opcode::RcSendOnlyInv.to_string(),
            "RC_SEND_ONLY_WITH_INVALIDATE"
        );
        assert_eq!(
            ParseError::UnknownOpcode(0x15).to_string(),
            "unknown opcode 0x15"
        );
        assert_eq!(
            BuildError::MissingHeader(Ext::Reth).to_string(),
            "opcode requires RETH"
        );
    }

    /// rxe's RXE_RWR_MASK and RXE_COMP_MASK opcodes, transcribed from
    /// rxe_opcode.c.
    #[test]
    fn recv_wqe_flags_match_rxe() {
        let rwr = [
            0x00, 0x04, 0x05, 0x09, 0x0b, 0x17, 0x20, 0x24, 0x25, 0x29, 0x2b, 0x64, 0x65,
        ];
        let comp = [
            0x02, 0x03, 0x04, 0x05, 0x09, 0x0b, 0x16, 0x17, 0x22, 0x23, 0x24, 0x25, 0x29, 0x2b,
            0x64, 0x65,
        ];
        for &op in Opcode::ALL {
            let i = op.info();
            assert_eq!(i.consumes_recv_wqe(), rwr.contains(&op.code()), "{op}");
            assert_eq!(i.completes_recv_wqe(), comp.contains(&op.code()), "{op}");
        }
    }

    /// An independent statement of the acceptance rules, written from the
    /// rxe tables rather than from `Opcode::info`.
    fn oracle(buf: &[u8], mtu: Option<u32>) -> bool {
        if buf.len() < 16 {
            return false;
        }
        let op = buf[0];
        // (header length, payload: 0 none / 1 data / 2 exactly 8, position)
        let (hdr, rule, pos) = match op {
            0x00 | 0x20 => (12, 1, 'F'),
            0x01 | 0x21 => (12, 1, 'M'),
            0x02 | 0x22 => (12, 1, 'L'),
            0x03 | 0x23 | 0x16 => (16, 1, 'L'),
            0x04 | 0x24 => (12, 1, 'O'),
            0x05 | 0x25 | 0x17 => (16, 1, 'O'),
            0x06 | 0x26 => (28, 1, 'F'),
            0x07 | 0x27 => (12, 1, 'M'),
            0x08 | 0x28 => (12, 1, 'L'),
            0x09 | 0x29 => (16, 1, 'L'),
            0x0a | 0x2a => (28, 1, 'O'),
            0x0b | 0x2b => (32, 1, 'O'),
            0x0c => (28, 0, 'O'),
            0x0d => (16, 1, 'F'),
            0x0e => (12, 1, 'M'),
            0x0f => (16, 1, 'L'),
            0x10 => (16, 1, 'O'),
            0x11 => (16, 0, 'O'),
            0x12 => (24, 0, 'O'),
            0x13 | 0x14 => (40, 0, 'O'),
            0x1c => (32, 0, 'O'),
            0x1d => (28, 2, 'O'),
            0x64 => (20, 1, 'O'),
            0x65 => (24, 1, 'O'),
            0x81 => (28, 0, 'O'),
            _ => return false,
        };
        if buf[1] & 0x0f != 0 || buf.len() < hdr + 4 {
            return false;
        }
        let aeth_at = match op {
            0x0d | 0x0f | 0x10 | 0x11 | 0x12 => Some(12),
            _ => None,
        };
        if let Some(at) = aeth_at {
            let s = buf[at];
            let ok = match s >> 5 {
                0 | 1 => true,
                3 => s & 0x1f <= 4,
                _ => false,
            };
            if !ok {
                return false;
            }
        }
        let data = buf.len() - hdr - 4;
        let pad = usize::from((buf[1] >> 4) & 3);
        if !data.is_multiple_of(4) || pad > data {
            return false;
        }
        let payload = data - pad;
        match rule {
            0 => data == 0,
            2 => payload == 8,
            _ => match mtu.map(|m| m as usize) {
                None => true,
                Some(m) => match pos {
                    'F' | 'M' => payload == m,
                    'L' => payload >= 1 && payload <= m,
                    _ => payload <= m,
                },
            },
        }
    }

    fn any_opcode() -> impl Strategy<Value = Opcode> {
        proptest::sample::select(Opcode::ALL)
    }

    fn any_mtu() -> impl Strategy<Value = Option<u32>> {
        prop_oneof![
            Just(None),
            proptest::sample::select(&[256u32, 512, 1024, 2048, 4096][..]).prop_map(Some),
            (0u32..300).prop_map(Some),
        ]
    }

    /// Headers for `op` with random field values (all in range).
    fn any_headers(op: Opcode) -> impl Strategy<Value = Headers> {
        (
            any::<[bool; 5]>(),
            any::<u16>(),
            0..=QPN_MASK,
            0..=QPN_MASK,
            any::<[u64; 4]>(),
            any::<[u32; 4]>(),
            0u8..=0xff,
        )
            .prop_map(move |(flags, pkey, qpn, psn, q, d, syn)| {
                let mut h = selftest::sample_headers(op, d[0]);
                h.bth.solicited = flags[0];
                h.bth.mig_req = flags[1];
                h.bth.fecn = flags[2];
                h.bth.becn = flags[3];
                h.bth.ack_req = flags[4];
                h.bth.pkey = pkey;
                h.bth.dest_qpn = qpn;
                h.bth.psn = Psn::new(psn);
                if let Some(r) = h.reth.as_mut() {
                    *r = Reth {
                        va: q[0],
                        rkey: d[1],
                        len: d[2],
                    };
                }
                if let Some(a) = h.aeth.as_mut() {
                    a.syndrome = Syndrome::from_byte(syn & 0x7f).unwrap_or(Syndrome::Ack {
                        credits: syn & 0x1f,
                    });
                    a.msn = d[3] & QPN_MASK;
                }
                if let Some(a) = h.atomic_eth.as_mut() {
                    *a = AtomicEth {
                        va: q[0],
                        rkey: d[1],
                        swap_add: q[1],
                        compare: q[2],
                    };
                }
                if let Some(a) = h.atomic_ack_eth.as_mut() {
                    a.orig = q[3];
                }
                if let Some(i) = h.imm_dt.as_mut() {
                    i.imm = d[2];
                }
                if let Some(i) = h.ieth.as_mut() {
                    i.rkey = d[3];
                }
                if let Some(dt) = h.deth.as_mut() {
                    *dt = Deth {
                        qkey: d[1],
                        src_qpn: d[2] & QPN_MASK,
                    };
                }
                if let Some(f) = h.feth.as_mut() {
                    *f = Feth {
                        placement_type: syn & 0x0f,
                        selectivity: (syn >> 4) & 3,
                    };
                }
                h
            })
    }

    fn headers_and_payload() -> impl Strategy<Value = (Headers, Vec<u8>)> {
        any_opcode().prop_flat_map(|op| {
            let len = match op.info().payload {
                PayloadRule::None => 0..=0usize,
                PayloadRule::Exactly(n) => n..=n,
                PayloadRule::Data => 0..=600usize,
            };
            // Favour the lengths at the edges of the MTU rules.
            let len = prop_oneof![
                4 => len.clone(),
                1 => Just(*len.start()),
                1 => Just((*len.end()).min(256)),
                1 => Just((*len.end()).min(257)),
            ];
            (any_headers(op), len)
                .prop_flat_map(|(h, n)| (Just(h), proptest::collection::vec(any::<u8>(), n)))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn build_parse_round_trip((mut h, payload) in headers_and_payload()) {
            let mut buf = vec![0u8; MAX_HDR_LEN + payload.len() + 8];
            let len = build(&h, &payload, &mut buf).unwrap();
            prop_assert_eq!(Some(len), packet_len(h.bth.opcode, payload.len()));
            let p = parse(&buf[..len], None).unwrap();
            h.bth.pad = pad_len(payload.len()) as u8;
            prop_assert_eq!(p.headers(), &h);
            prop_assert_eq!(p.payload(), &payload[..]);
            prop_assert_eq!(p.wire_len(), len);
            prop_assert!(oracle(&buf[..len], None));
            // Rebuilding from the parse reproduces the bytes exactly.
            let mut again = vec![0u8; len];
            prop_assert_eq!(build(p.headers(), p.payload(), &mut again), Ok(len));
            prop_assert_eq!(&again[..], &buf[..len]);
        }

        #[test]
        fn parse_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200), mtu in any_mtu()) {
            let r = parse(&buf, mtu);
            prop_assert_eq!(r.is_ok(), oracle(&buf, mtu), "{:?}", r);
        }

        /// Start from a valid packet and corrupt it: the parser agrees with
        /// the oracle on every mutation.
        #[test]
        fn parse_matches_oracle_on_mutations(
            (h, payload) in headers_and_payload(),
            mtu in any_mtu(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut in -8i32..8,
        ) {
            let mut buf = vec![0u8; MAX_HDR_LEN + payload.len() + 16];
            let len = build(&h, &payload, &mut buf).unwrap();
            let len = (len as i32 + cut).clamp(0, buf.len() as i32) as usize;
            let pkt = &mut buf[..len];
            if !pkt.is_empty() {
                for (i, x) in flips {
                    let i = i.index(pkt.len().min(MAX_HDR_LEN));
                    pkt[i] ^= x;
                }
            }
            let r = parse(pkt, mtu);
            prop_assert_eq!(r.is_ok(), oracle(pkt, mtu), "{:?}", r);
            if let Ok(p) = r {
                prop_assert_eq!(p.wire_len(), pkt.len());
                prop_assert_eq!(p.header_bytes(), &pkt[..p.info().hdr_len]);
                prop_assert_eq!(usize::from(p.bth().pad), p.pad_bytes().len());
                // Whatever parses can be rebuilt and parses the same.
                let mut again = vec![0u8; pkt.len()];
                let n = build(p.headers(), p.payload(), &mut again).unwrap();
                prop_assert_eq!(n, pkt.len());
                let q = parse(&again, mtu).unwrap();
                prop_assert_eq!(q.headers(), p.headers());
                prop_assert_eq!(q.payload(), p.payload());
            }
        }

        #[test]
        fn build_never_panics(
            (mut h, payload) in headers_and_payload(),
            buf_len in 0usize..700,
            qpn in any::<u32>(),
            resv in any::<u8>(),
        ) {
            h.bth.dest_qpn = qpn;
            h.bth.resv7 = resv;
            let mut buf = vec![0u8; buf_len];
            if let Ok(n) = build(&h, &payload, &mut buf) {
                prop_assert!(parse(&buf[..n], None).is_ok());
            }
        }
    }
}
