// SPDX-License-Identifier: GPL-2.0

//! The C uapi header and its Rust mirror must describe the same bytes.
//!
//! Compiles `tests/abi/layout.c` (which includes `uapi/rdma/rroce-abi.h`)
//! with the host C compiler, runs it, and compares every size, alignment,
//! field offset, field size and constant it prints with `src/abi/`. Fails
//! on any difference and on any type, field or constant present on one side
//! only. Each side's field list must also tile its struct (no gaps, nothing
//! past the end), so a field left out of either list, or implicit padding,
//! fails too; and the Rust list is checked against the struct definitions
//! at compile time (an exhaustive destructuring pattern per type).

use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rroce_engine::abi::*;

/// One field row: name (C spelling, `a.b` for members of an anonymous
/// union), offset, size (0 for flexible arrays).
type Row = (String, usize, usize);

/// A type as one side describes it.
#[derive(Debug, Default)]
struct TypeInfo {
    size: usize,
    align: usize,
    rows: Vec<Row>,
}

/// What one side (C or Rust) describes.
#[derive(Debug, Default)]
struct Side {
    types: BTreeMap<String, TypeInfo>,
    consts: BTreeMap<String, u64>,
}

fn field_size<T, F>(_: impl Fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// Rust spelling of a field name to the C one (`r#type` -> `type`).
fn c_name(rust: &str) -> String {
    rust.trim_start_matches("r#").to_string()
}

/// `ty!(RustType => "c_name" { fields } hidden { backing storage }
/// alias { "c_member" = backing_field: MemberType })`.
///
/// `fields` are real fields that exist in C under the same name; `hidden`
/// are real fields with no C counterpart (the byte storage of a mirrored
/// union); `alias` rows are C members represented in Rust by accessors over
/// a real field (their offset is that field's, their size the member
/// type's). fields + hidden must name every field of the Rust struct: the
/// destructuring pattern below does not compile otherwise.
macro_rules! ty {
    ($side:ident, $t:ident => $c:literal
        { $($f:ident),* $(,)? }
        $(hidden { $($h:ident),* $(,)? })?
        $(alias { $($a:literal = $af:ident : $at:ty),* $(,)? })?
    ) => {{
        #[allow(dead_code)]
        fn exhaustive(x: &$t) {
            let $t { $($f: _,)* $($($h: _,)*)? } = x;
        }
        let mut rows: Vec<Row> = Vec::new();
        $(rows.push((c_name(stringify!($f)), offset_of!($t, $f), field_size(|x: &$t| &x.$f)));)*
        $($(rows.push(($a.to_string(), offset_of!($t, $af), size_of::<$at>()));)*)?
        let info = TypeInfo { size: size_of::<$t>(), align: align_of::<$t>(), rows };
        assert!($side.types.insert($c.to_string(), info).is_none(), "{} listed twice", $c);
    }};
}

/// Lossless widening of the constants' various integer types.
trait ToU64 {
    fn to_u64(self) -> u64;
}

macro_rules! to_u64 {
    ($($t:ty),*) => {$(
        impl ToU64 for $t {
            fn to_u64(self) -> u64 {
                u64::try_from(self).expect("constant fits in u64")
            }
        }
    )*};
}

to_u64!(u8, u16, u32, u64, usize);

macro_rules! consts {
    ($side:ident, $($n:ident),* $(,)?) => {
        $(assert!(
            $side.consts.insert(concat!("RROCE_", stringify!($n)).to_string(), $n.to_u64()).is_none(),
            "{} listed twice", stringify!($n)
        );)*
    };
}

/// Everything `src/abi/` declares: its types, then its constants.
fn rust_side() -> Side {
    let mut s = Side::default();
    rust_types(&mut s);
    rust_consts(&mut s);
    s
}

/// Adds every ABI type of `src/abi/` to `s`.
fn rust_types(s: &mut Side) {
    ty!(s, QueueBuf => "rroce_queue_buf" {
        log2_elem_size, index_mask, pad_1, producer_index, pad_2, consumer_index, pad_3, data
    });
    ty!(s, MmapInfo => "rroce_mminfo" { offset, size, pad });
    ty!(s, CreateCqResp => "rroce_create_cq_resp" { mi });
    ty!(s, ResizeCqResp => "rroce_resize_cq_resp" { mi });
    ty!(s, CreateQpResp => "rroce_create_qp_resp" { rq_mi, sq_mi });
    ty!(s, CreateSrqResp => "rroce_create_srq_resp" { mi, srq_num, reserved });
    ty!(s, ModifySrqCmd => "rroce_modify_srq_cmd" { mmap_info_addr });
    ty!(s, CreateAhResp => "rroce_create_ah_resp" { ah_num, reserved });
    ty!(s, GidGlobal => "rroce_gid_global" { subnet_prefix, interface_id });
    ty!(s, Gid => "rroce_gid" { raw } alias { "global" = raw: GidGlobal });
    ty!(s, GlobalRoute => "rroce_global_route" {
        dgid, flow_label, sgid_index, hop_limit, traffic_class, reserved
    });
    ty!(s, SockaddrIn => "rroce_sockaddr_in" { family, port, addr, zero });
    ty!(s, SockaddrIn6 => "rroce_sockaddr_in6" { family, port, flowinfo, addr, scope_id });
    ty!(s, Sockaddr => "rroce_sockaddr" {} hidden { raw } alias {
        "sin" = raw: SockaddrIn,
        "sin6" = raw: SockaddrIn6,
    });
    ty!(s, Av => "rroce_av" { port_num, network_type, dmac, grh, sgid_addr, dgid_addr });
    ty!(s, WrFlush => "rroce_wr_flush" { remote_addr, length, rkey, r#type, level, reserved });
    ty!(s, WrRdma => "rroce_wr_rdma" { remote_addr, rkey, reserved });
    ty!(s, WrAtomic => "rroce_wr_atomic" { remote_addr, compare_add, swap, rkey, reserved });
    ty!(s, WrUd => "rroce_wr_ud" { remote_qpn, remote_qkey, pkey_index, reserved, ah_num, pad, av });
    ty!(s, WrMw => "rroce_wr_mw" { addr, length, mr_lkey, mw_rkey, rkey, access });
    ty!(s, WrUnion => "rroce_wr_union" {} hidden { raw } alias {
        "flush" = raw: WrFlush,
        "rdma" = raw: WrRdma,
        "atomic" = raw: WrAtomic,
        "ud" = raw: WrUd,
        "mw" = raw: WrMw,
    });
    ty!(s, SendWr => "rroce_send_wr" { wr_id, reserved, opcode, send_flags, ex, wr } alias {
        "ex.imm_data" = ex: u32,
        "ex.invalidate_rkey" = ex: u32,
    });
    ty!(s, Sge => "rroce_sge" { addr, length, lkey });
    ty!(s, DmaInfo => "rroce_dma_info" {
        length, resid, cur_sge, num_sge, sge_offset, reserved, sge
    } alias {
        "inline_data" = sge: [u8; 0],
        "atomic_wr" = sge: [u8; 0],
    });
    ty!(s, SendWqe => "rroce_send_wqe" {
        wr, status, state, iova, mask, first_psn, last_psn, ack_length, ssn, has_rd_atomic, dma
    });
    ty!(s, RecvWqe => "rroce_recv_wqe" { wr_id, reserved, padding, dma });
    ty!(s, Cqe => "rroce_cqe" {
        wr_id, status, opcode, vendor_err, byte_len, ex, qp_num, src_qp, wc_flags,
        pkey_index, slid, sl, dlid_path_bits, port_num, reserved
    } alias {
        "ex.imm_data" = ex: u32,
        "ex.invalidate_rkey" = ex: u32,
    });
}

/// Adds every ABI constant of `src/abi/` to `s`.
fn rust_consts(s: &mut Side) {
    consts!(s, DRIVER_ID, UVERBS_ABI_VERSION, ABI_MINOR);
    consts!(
        s,
        QUEUE_LOG2_ELEM_SIZE_OFFSET,
        QUEUE_INDEX_MASK_OFFSET,
        QUEUE_PRODUCER_OFFSET,
        QUEUE_CONSUMER_OFFSET,
        QUEUE_DATA_OFFSET,
    );
    consts!(s, NETWORK_TYPE_IPV4, NETWORK_TYPE_IPV6);
    consts!(
        s,
        WR_RDMA_WRITE,
        WR_RDMA_WRITE_WITH_IMM,
        WR_SEND,
        WR_SEND_WITH_IMM,
        WR_RDMA_READ,
        WR_ATOMIC_CMP_AND_SWP,
        WR_ATOMIC_FETCH_AND_ADD,
        WR_LOCAL_INV,
        WR_BIND_MW,
        WR_SEND_WITH_INV,
        WR_TSO,
        WR_RDMA_READ_WITH_INV,
        WR_MASKED_ATOMIC_CMP_AND_SWP,
        WR_MASKED_ATOMIC_FETCH_AND_ADD,
        WR_FLUSH,
        WR_ATOMIC_WRITE,
    );
    consts!(
        s,
        SEND_FENCE,
        SEND_SIGNALED,
        SEND_SOLICITED,
        SEND_INLINE,
        SEND_IP_CSUM
    );
    consts!(
        s,
        WC_SUCCESS,
        WC_LOC_LEN_ERR,
        WC_LOC_QP_OP_ERR,
        WC_LOC_EEC_OP_ERR,
        WC_LOC_PROT_ERR,
        WC_WR_FLUSH_ERR,
        WC_MW_BIND_ERR,
        WC_BAD_RESP_ERR,
        WC_LOC_ACCESS_ERR,
        WC_REM_INV_REQ_ERR,
        WC_REM_ACCESS_ERR,
        WC_REM_OP_ERR,
        WC_RETRY_EXC_ERR,
        WC_RNR_RETRY_EXC_ERR,
        WC_LOC_RDD_VIOL_ERR,
        WC_REM_INV_RD_REQ_ERR,
        WC_REM_ABORT_ERR,
        WC_INV_EECN_ERR,
        WC_INV_EEC_STATE_ERR,
        WC_FATAL_ERR,
        WC_RESP_TIMEOUT_ERR,
        WC_GENERAL_ERR,
    );
    consts!(
        s,
        WC_SEND,
        WC_RDMA_WRITE,
        WC_RDMA_READ,
        WC_COMP_SWAP,
        WC_FETCH_ADD,
        WC_BIND_MW,
        WC_LOCAL_INV,
        WC_TSO,
        WC_FLUSH,
        WC_ATOMIC_WRITE,
        WC_RECV,
        WC_RECV_RDMA_WITH_IMM,
    );
    consts!(s, WC_GRH, WC_WITH_IMM, WC_IP_CSUM_OK, WC_WITH_INV);
    consts!(
        s,
        MAX_QP,
        MIN_QP_INDEX,
        MAX_QP_WR,
        MAX_SEND_SGE,
        MAX_RECV_SGE,
        MAX_SGE_RD,
        MAX_INLINE_DATA,
        MAX_CQ,
        MAX_CQE,
        MAX_SRQ,
        MAX_SRQ_WR,
        MAX_SRQ_SGE,
        MAX_PD,
        MAX_MR,
        MAX_MW,
        MAX_MR_SIZE,
        PAGE_SIZE_CAP,
        MAX_FAST_REG_PAGE_LIST_LEN,
        MAX_AH,
        MIN_AH_INDEX,
        MAX_QP_RD_ATOM,
        MAX_QP_INIT_RD_ATOM,
        MAX_RES_RD_ATOM,
        MAX_MCAST_GRP,
        MAX_MCAST_QP_ATTACH,
        MAX_TOTAL_MCAST_QP_ATTACH,
        MAX_PKEYS,
        GID_TBL_LEN,
        MAX_MTU,
        MAX_MSG_SIZE,
        LOCAL_CA_ACK_DELAY,
        VENDOR_ID,
    );
}

/// Builds and runs tests/abi/layout.c (once per test process); returns its
/// output.
fn run_layout_c() -> &'static str {
    static OUTPUT: OnceLock<String> = OnceLock::new();
    OUTPUT.get_or_init(build_and_run_layout_c)
}

fn build_and_run_layout_c() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("abi_layout");
    std::fs::create_dir_all(&dir).expect("create the temp dir under target/");
    // One binary per process: concurrent `cargo test` runs must not race.
    let exe = dir.join(format!("layout-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("uapi"))
        .arg(root.join("tests/abi/layout.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` (install gcc): {e}"));
    assert!(
        out.status.success(),
        "compiling tests/abi/layout.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output();
    let _ = std::fs::remove_file(&exe);
    let run = run.expect("run the layout program");
    assert!(run.status.success(), "the layout program failed");
    String::from_utf8(run.stdout).expect("layout output is UTF-8")
}

fn num<T: std::str::FromStr>(s: Option<&str>, line: &str) -> T {
    s.and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("malformed layout line: {line}"))
}

fn parse_c(text: &str) -> Side {
    let mut s = Side::default();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let Some(head) = w.next() else { continue };
        match head {
            "size" | "align" => {
                let name = w
                    .next()
                    .unwrap_or_else(|| panic!("malformed layout line: {line}"));
                let v: usize = num(w.next(), line);
                let t = s.types.entry(name.to_string()).or_default();
                if head == "size" {
                    t.size = v;
                } else {
                    t.align = v;
                }
            }
            "const" => {
                let name = w
                    .next()
                    .unwrap_or_else(|| panic!("malformed layout line: {line}"));
                let v: u64 = num(w.next(), line);
                assert!(
                    s.consts.insert(name.to_string(), v).is_none(),
                    "{name} printed twice"
                );
            }
            _ => {
                let (t, f) = head
                    .split_once('.')
                    .unwrap_or_else(|| panic!("malformed layout line: {line}"));
                let off: usize = num(w.next(), line);
                let size: usize = num(w.next(), line);
                let info = s
                    .types
                    .get_mut(t)
                    .unwrap_or_else(|| panic!("field of a type with no size line: {line}"));
                info.rows.push((f.to_string(), off, size));
            }
        }
    }
    s
}

/// Checks that the top-level rows of `info` tile the type: struct fields
/// follow each other with no gap (members of an anonymous union share an
/// offset) and end at its size; union members start at 0 and the largest
/// fills it.
fn check_tiling(side: &str, name: &str, info: &TypeInfo, errors: &mut Vec<String>) {
    let mut rows: Vec<&Row> = info.rows.iter().filter(|r| !r.0.contains('.')).collect();
    rows.sort_by_key(|r| (r.1, r.2));
    if rows.is_empty() {
        errors.push(format!("{side}: {name} lists no fields"));
        return;
    }
    let mut end = 0;
    let mut last_start = 0;
    for (f, off, size) in rows {
        if *off != end && *off != last_start {
            errors.push(format!(
                "{side}: {name}.{f} starts at {off}, but the fields before it end at {end} \
                 (a field is missing from the list, or there is implicit padding)"
            ));
        }
        last_start = *off;
        end = end.max(off + size);
    }
    if end != info.size {
        errors.push(format!(
            "{side}: the fields of {name} end at {end} but it is {} bytes \
             (a field is missing from the list, or there is tail padding)",
            info.size
        ));
    }
}

fn compare(c: &Side, r: &Side) -> (Vec<String>, usize) {
    let mut errors = Vec::new();
    let mut checks = 0;
    let names: BTreeSet<&String> = c.types.keys().chain(r.types.keys()).collect();
    for name in names {
        let (ct, rt) = match (c.types.get(name), r.types.get(name)) {
            (Some(ct), Some(rt)) => (ct, rt),
            (Some(_), None) => {
                errors.push(format!("{name}: in the C header but not in src/abi/"));
                continue;
            }
            _ => {
                errors.push(format!("{name}: in src/abi/ but not in the C header"));
                continue;
            }
        };
        checks += 2;
        if ct.size != rt.size {
            errors.push(format!("size {name}: C {} Rust {}", ct.size, rt.size));
        }
        if ct.align != rt.align {
            errors.push(format!("align {name}: C {} Rust {}", ct.align, rt.align));
        }
        check_tiling("C", name, ct, &mut errors);
        check_tiling("Rust", name, rt, &mut errors);
        let cf: BTreeMap<&str, (usize, usize)> = ct
            .rows
            .iter()
            .map(|(f, o, s)| (f.as_str(), (*o, *s)))
            .collect();
        let rf: BTreeMap<&str, (usize, usize)> = rt
            .rows
            .iter()
            .map(|(f, o, s)| (f.as_str(), (*o, *s)))
            .collect();
        assert_eq!(
            cf.len(),
            ct.rows.len(),
            "{name}: a C field is printed twice"
        );
        assert_eq!(
            rf.len(),
            rt.rows.len(),
            "{name}: a Rust field is listed twice"
        );
        for f in cf.keys().chain(rf.keys()).collect::<BTreeSet<_>>() {
            checks += 1;
            match (cf.get(f), rf.get(f)) {
                (Some(a), Some(b)) if a == b => {}
                (Some((co, cs)), Some((ro, rs))) => errors.push(format!(
                    "{name}.{f}: C offset {co} size {cs}, Rust offset {ro} size {rs}"
                )),
                (Some(_), None) => errors.push(format!("{name}.{f}: in C but not in Rust")),
                _ => errors.push(format!("{name}.{f}: in Rust but not in C")),
            }
        }
    }
    let names: BTreeSet<&String> = c.consts.keys().chain(r.consts.keys()).collect();
    for name in names {
        checks += 1;
        match (c.consts.get(name), r.consts.get(name)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => errors.push(format!("{name}: C {a} Rust {b}")),
            (Some(_), None) => errors.push(format!("{name}: in C but not in Rust")),
            _ => errors.push(format!("{name}: in Rust but not in C")),
        }
    }
    (errors, checks)
}

#[test]
fn c_header_and_rust_mirror_agree() {
    let c = parse_c(run_layout_c());
    let r = rust_side();
    let (errors, checks) = compare(&c, &r);
    for e in &errors {
        eprintln!("abi mismatch: {e}");
    }
    assert!(
        errors.is_empty(),
        "{} ABI mismatch(es) between uapi/rdma/rroce-abi.h and src/abi/ (see above)",
        errors.len()
    );
    let fields: usize = r.types.values().map(|t| t.rows.len()).sum();
    eprintln!(
        "abi_layout: {checks} checks passed ({} types, {fields} fields, {} constants)",
        r.types.len(),
        r.consts.len()
    );
}

/// The comparison itself must notice a drift: feed it a C side with one
/// field moved, one field missing and one constant changed.
#[test]
fn comparison_detects_drift() {
    let good = parse_c(run_layout_c());
    let mut c = parse_c(run_layout_c());
    let cqe = c.types.get_mut("rroce_cqe").expect("rroce_cqe printed");
    let status = cqe
        .rows
        .iter_mut()
        .find(|r| r.0 == "status")
        .expect("status");
    status.1 += 4;
    cqe.rows.retain(|r| r.0 != "slid");
    *c.consts
        .get_mut("RROCE_MAX_SEND_SGE")
        .expect("constant printed") += 1;
    let (errors, _) = compare(&c, &rust_side());
    let all = errors.join("\n");
    assert!(all.contains("rroce_cqe.status: C offset 12"), "{all}");
    assert!(
        all.contains("rroce_cqe.slid: in Rust but not in C"),
        "{all}"
    );
    assert!(all.contains("RROCE_MAX_SEND_SGE: C 33 Rust 32"), "{all}");
    assert!(
        all.contains("C: rroce_cqe."),
        "tiling must notice the gap: {all}"
    );
    assert!(compare(&good, &rust_side()).0.is_empty());
}

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

/// Decoding reads the fields at the C offsets, in native byte order.
#[test]
fn send_wqe_decodes_at_c_offsets() {
    let mut elem = [0u8; SEND_WQE_HEADER_SIZE + 2 * 16];
    put(&mut elem, 0, &0x1122_3344_5566_7788u64.to_ne_bytes());
    put(&mut elem, 12, &WR_RDMA_WRITE_WITH_IMM.to_ne_bytes());
    put(&mut elem, 16, &SEND_SIGNALED.to_ne_bytes());
    put(&mut elem, 20, &[0xde, 0xad, 0xbe, 0xef]);
    put(&mut elem, 24, &0xaaaa_bbbb_cccc_ddddu64.to_ne_bytes());
    put(&mut elem, 32, &0x1234u32.to_ne_bytes());
    put(&mut elem, 152, &0xaaaa_bbbb_cccc_ddddu64.to_ne_bytes());
    put(&mut elem, 176, &7u32.to_ne_bytes());
    put(&mut elem, 184, &300u32.to_ne_bytes());
    put(&mut elem, 196, &2u32.to_ne_bytes());
    put(&mut elem, 208, &0x1000u64.to_ne_bytes());
    put(&mut elem, 216, &100u32.to_ne_bytes());
    put(&mut elem, 220, &0x55u32.to_ne_bytes());
    put(&mut elem, 224, &0x2000u64.to_ne_bytes());
    put(&mut elem, 232, &200u32.to_ne_bytes());
    put(&mut elem, 236, &0x66u32.to_ne_bytes());

    let w = SendWqe::from_bytes(&elem).expect("long enough");
    assert_eq!(w.wr.wr_id, 0x1122_3344_5566_7788);
    assert_eq!(w.wr.opcode, WR_RDMA_WRITE_WITH_IMM);
    assert_eq!(w.wr.send_flags, SEND_SIGNALED);
    assert_eq!(w.wr.ex.to_ne_bytes(), [0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(w.wr.wr.rdma().remote_addr, 0xaaaa_bbbb_cccc_dddd);
    assert_eq!(w.wr.wr.rdma().rkey, 0x1234);
    assert_eq!(w.iova, 0xaaaa_bbbb_cccc_dddd);
    assert_eq!(w.ssn, 7);
    assert_eq!(w.dma.length, 300);
    assert_eq!(w.dma.num_sge, 2);
    let s1 = SendWqe::sge(&elem, 1).expect("second SGE");
    assert_eq!((s1.addr, s1.length, s1.lkey), (0x2000, 200, 0x66));
    assert_eq!(SendWqe::sge(&elem, 0).map(|s| s.lkey), Some(0x55));
    assert_eq!(SendWqe::sge(&elem, 2), None, "beyond the element");
    assert_eq!(SendWqe::sge(&elem, usize::MAX), None, "no overflow");
    assert_eq!(SendWqe::payload(&elem, 8), Some(&elem[208..216]));
    assert_eq!(SendWqe::payload(&elem, 33), None);
    assert_eq!(SendWqe::from_bytes(&elem[..SEND_WQE_HEADER_SIZE - 1]), None);

    // Round trip, and the ud member sits over the same bytes.
    let mut again = [0u8; SEND_WQE_HEADER_SIZE];
    w.encode(&mut again).expect("fits");
    assert_eq!(again[..], elem[..SEND_WQE_HEADER_SIZE]);
    let ud = WrUd {
        ah_num: 9,
        remote_qpn: 0x12_3456,
        ..WrUd::default()
    };
    let u = WrUnion::from_ud(&ud);
    assert_eq!(u.raw[12..16], 9u32.to_ne_bytes());
    assert_eq!(u.ud(), ud);
}

#[test]
fn recv_wqe_and_cqe_codec() {
    let mut elem = [0u8; RECV_WQE_HEADER_SIZE + 16];
    put(&mut elem, 0, &42u64.to_ne_bytes());
    put(&mut elem, 16, &64u32.to_ne_bytes());
    put(&mut elem, 28, &1u32.to_ne_bytes());
    put(&mut elem, 40, &0x9000u64.to_ne_bytes());
    put(&mut elem, 48, &64u32.to_ne_bytes());
    put(&mut elem, 52, &0x77u32.to_ne_bytes());
    let r = RecvWqe::from_bytes(&elem).expect("long enough");
    assert_eq!((r.wr_id, r.dma.length, r.dma.num_sge), (42, 64, 1));
    let s = RecvWqe::sge(&elem, 0).expect("SGE");
    assert_eq!((s.addr, s.length, s.lkey), (0x9000, 64, 0x77));
    assert_eq!(RecvWqe::sge(&elem, 1), None);

    let cqe = Cqe {
        wr_id: 0x0102_0304_0506_0708,
        status: WC_SUCCESS,
        opcode: WC_RECV,
        byte_len: 4096,
        ex: u32::from_ne_bytes([1, 2, 3, 4]),
        qp_num: 17,
        src_qp: 0x10_0001,
        wc_flags: WC_GRH | WC_WITH_IMM,
        port_num: 1,
        ..Cqe::default()
    };
    let b = cqe.to_bytes();
    assert_eq!(b[0..8], 0x0102_0304_0506_0708u64.to_ne_bytes());
    assert_eq!(b[12..16], WC_RECV.to_ne_bytes());
    assert_eq!(b[20..24], 4096u32.to_ne_bytes());
    assert_eq!(b[24..28], [1, 2, 3, 4], "imm_data stays in network order");
    assert_eq!(b[28..32], 17u32.to_ne_bytes());
    assert_eq!(b[36..40], (WC_GRH | WC_WITH_IMM).to_ne_bytes());
    assert_eq!(b[46], 1);
    assert_eq!(Cqe::from_bytes(&b), Some(cqe));

    let resp = CreateQpResp {
        rq_mi: MmapInfo {
            offset: 0x1000,
            size: 0x3000,
            pad: 0,
        },
        sq_mi: MmapInfo {
            offset: 0x4000,
            size: 0x8000,
            pad: 0,
        },
    };
    let b = resp.to_bytes();
    assert_eq!(b[16..24], 0x4000u64.to_ne_bytes(), "sq_mi follows rq_mi");
    let q = QueueBuf::new(6, 255).to_bytes();
    assert_eq!(q[0..4], 6u32.to_ne_bytes());
    assert_eq!(q[4..8], 255u32.to_ne_bytes());
    assert!(q[8..].iter().all(|&x| x == 0));
}
