// SPDX-License-Identifier: GPL-2.0

//! The transport headers as decoded values (BTH and the extension headers,
//! gathered in [`Headers`]) and their byte codecs: the field reader and
//! writer and the per-extension-header decode and encode steps.

use super::*;

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
    pub(super) fn decode(b: [u8; BTH_LEN]) -> Result<Self, ParseError> {
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
    pub(super) fn encode(&self, pad: u8) -> Result<[u8; BTH_LEN], BuildError> {
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

/// Returns `FieldOutOfRange(name)` unless `ok`.
fn check_field(ok: bool, name: &'static str) -> Result<(), BuildError> {
    if ok {
        Ok(())
    } else {
        Err(BuildError::FieldOutOfRange(name))
    }
}

/// Reads fixed-size fields off the front of a byte slice.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    /// Returned if the slice runs out (cannot happen once the header length
    /// has been checked against the opcode table).
    pub(super) short: ParseError,
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
pub(super) struct Writer<'a> {
    pub(super) buf: &'a mut [u8],
    /// Returned if the slice runs out (cannot happen once the total length
    /// has been checked).
    pub(super) short: BuildError,
}

impl Writer<'_> {
    pub(super) fn put<const N: usize>(&mut self, bytes: [u8; N]) -> Result<(), BuildError> {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf.split_first_chunk_mut::<N>().ok_or(self.short)?;
        *head = bytes;
        self.buf = rest;
        Ok(())
    }

    pub(super) fn put_slice(&mut self, bytes: &[u8]) -> Result<(), BuildError> {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf.split_at_mut_checked(bytes.len()).ok_or(self.short)?;
        head.copy_from_slice(bytes);
        self.buf = rest;
        Ok(())
    }

    pub(super) fn zeros(&mut self, n: usize) -> Result<(), BuildError> {
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
pub(super) fn decode_ext(ext: Ext, r: &mut Reader<'_>, h: &mut Headers) -> Result<(), ParseError> {
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
pub(super) fn encode_ext(ext: Ext, h: &Headers, w: &mut Writer<'_>) -> Result<(), BuildError> {
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
pub(super) const OPTIONAL_EXTS: [Ext; 8] = [
    Ext::Reth,
    Ext::Aeth,
    Ext::AtomicEth,
    Ext::AtomicAckEth,
    Ext::ImmDt,
    Ext::Ieth,
    Ext::Deth,
    Ext::Feth,
];
