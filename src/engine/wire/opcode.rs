// SPDX-License-Identifier: GPL-2.0

//! The opcode table: what each BTH opcode means (transport, kind, position
//! in its message), which extension headers follow it and what payload it
//! may carry, as rdma_rxe's `rxe_opcode.c` has it.

use super::*;
use core::fmt;

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
