//! The bubblewrap backend's seccomp filters, compiled to BPF with seccompiler and handed to
//! `bwrap --add-seccomp-fd`, which installs them just before it starts Python.
//!
//! A deny-list on top of the namespaces: no new processes (a fork bomb is refused at the first
//! fork, for every user: `RLIMIT_NPROC` counts the user's processes host-wide and root ignores
//! it), and none of the calls that reach kernel attack surface a code interpreter has no use for
//! (namespaces, mounts, ptrace, BPF, io_uring, keyrings, modules). Threads are allowed; their
//! number is bounded by the address-space limit their stacks count against.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use crate::error::SandboxError;

/// The calls refused with `EPERM` whatever their arguments.
const DENIED: &[i64] = &[
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
];

/// x32 system calls on x86_64 carry this bit and the x86_64 audit architecture; seccompiler's
/// architecture check does not see them, so they are killed first.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The two programs to install, as the bytes `bwrap --add-seccomp-fd` reads: the deny-list
/// (`EPERM`, and `clone` without `CLONE_THREAD`, which is how `fork` and `posix_spawn` start a
/// process), and `clone3` answered `ENOSYS`, so that the C library falls back to `clone` for
/// threads (its flags are in memory a filter cannot read).
pub(crate) fn programs() -> Result<[Vec<u8>; 2], SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SandboxError::UnsupportedPlatform(std::env::consts::ARCH.into()))?;
    let fail = |error: seccompiler::BackendError| SandboxError::Seccomp(error.to_string());
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let new_process = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
        0,
    )
    .map_err(fail)?;
    denied.insert(
        libc::SYS_clone,
        vec![SeccompRule::new(vec![new_process]).map_err(fail)?],
    );
    let deny = SeccompFilter::new(
        denied,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(fail)?;
    let mut result = Vec::with_capacity(2);
    for filter in [deny, clone3] {
        let program: BpfProgram = filter.try_into().map_err(fail)?;
        result.push(to_bytes(&with_x32_check(program)));
    }
    let [first, second]: [Vec<u8>; 2] = result
        .try_into()
        .map_err(|_| SandboxError::Seccomp("expected two programs".into()))?;
    Ok([first, second])
}

#[cfg(target_arch = "x86_64")]
fn with_x32_check(program: BpfProgram) -> BpfProgram {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JGE_K: u16 = 0x35;
    const BPF_RET_K: u16 = 0x06;
    let check = [
        // seccomp_data.nr
        sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: BPF_JMP_JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_KILL_PROCESS,
        },
    ];
    // Jumps are relative, so the program after the check is unchanged.
    check.into_iter().chain(program).collect()
}

#[cfg(not(target_arch = "x86_64"))]
fn with_x32_check(program: BpfProgram) -> BpfProgram {
    program
}

/// `struct sock_filter` as the kernel lays it out, one after the other.
fn to_bytes(program: &[sock_filter]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    bytes
}
