//! The system-call filter every sandboxed program runs under (bubblewrap's `--seccomp`), as
//! a classic BPF program built here: no library, no compiler, and short enough to read.
//!
//! It refuses, with `EPERM`, what a program in the sandbox has no need of and what would
//! reach past it: new namespaces (`unshare`, `setns`, `clone` with a `CLONE_NEW*` flag; a
//! nested user namespace is where kernel bugs are reached from), the kernel's keyrings
//! (`keyctl`, `add_key`, `request_key`: not namespaced, so shared with the host's user),
//! `io_uring` (its operations pass no filter), `userfaultfd`, `bpf` and `perf_event_open`.
//! `clone3` answers `ENOSYS`, so the C library falls back to `clone`, whose flags the filter
//! can read. `socket` is allowed for the families a program needs alone (UNIX, IPv4, IPv6,
//! netlink): never vsock, whose sockets reach a hypervisor no network namespace separates.
//! With the host's network shared (`network = "host"`), `socket(AF_UNIX, …)` is refused
//! too: abstract UNIX sockets belong to the network namespace, and a shared one reaches every
//! such socket on the host (a display server, a container runtime's shim), and so is
//! `socketpair` of datagram or sequenced-packet sockets (whose sockets could still send to
//! one). A stream pair stays (programs use them between their own processes); its socket
//! can still `bind` an abstract name, which docs/broker.md lists as not closed. A call from
//! another architecture's ABI (x32, or i386 through `int 0x80`) kills the process.

/// One instruction of a classic BPF program (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Instruction {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET: u16 = 0x06; // BPF_RET | BPF_K
const AND: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K

const ALLOW: u32 = 0x7fff_0000;
const KILL_PROCESS: u32 = 0x8000_0000;
const fn errno(code: u32) -> u32 {
    0x0005_0000 | code
}
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

/// `struct seccomp_data`: the call's number, its architecture, its first argument (low half).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG1: u32 = 24;

/// Every `CLONE_NEW*` flag: cgroup, uts, ipc, user, pid, net, and the mount namespace's.
const CLONE_NEW_ANY: u32 = 0x7e02_0000;
const AF_UNIX: u32 = 1;
const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;
const AF_NETLINK: u32 = 16;
const SOCK_TYPE_MASK: u32 = 0xf;
const SOCK_DGRAM: u32 = 2;
const SOCK_SEQPACKET: u32 = 5;
/// The x32 ABI's calls carry this bit in their number.
const X32_BIT: u32 = 0x4000_0000;

/// The system-call numbers the filter names, for one architecture.
struct Calls {
    arch: u32,
    refused: &'static [u32],
    clone: u32,
    clone3: u32,
    socket: u32,
    socketpair: u32,
}

#[cfg(target_arch = "x86_64")]
const CALLS: Option<Calls> = Some(Calls {
    arch: 0xc000_003e,
    // unshare, setns, keyctl, add_key, request_key, io_uring_setup/enter/register,
    // userfaultfd, bpf, perf_event_open
    refused: &[272, 308, 250, 248, 249, 425, 426, 427, 323, 321, 298],
    clone: 56,
    clone3: 435,
    socket: 41,
    socketpair: 53,
});

#[cfg(target_arch = "aarch64")]
const CALLS: Option<Calls> = Some(Calls {
    arch: 0xc000_00b7,
    refused: &[97, 268, 219, 217, 218, 425, 426, 427, 282, 280, 241],
    clone: 220,
    clone3: 435,
    socket: 198,
    socketpair: 199,
});

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const CALLS: Option<Calls> = None;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> Instruction {
    Instruction { code, jt, jf, k }
}

/// Refuses `call` when its first argument matches `test` (`JSET` a mask, `JEQ` a value);
/// otherwise allows it. Five instructions; the call's number is in the accumulator.
fn by_first_argument(program: &mut Vec<Instruction>, call: u32, test: u16, k: u32) {
    program.extend([
        op(JEQ, 0, 4, call),
        op(LD_ABS, 0, 0, ARG0),
        op(test, 0, 1, k),
        op(RET, 0, 0, errno(EPERM)),
        op(RET, 0, 0, ALLOW),
    ]);
}

/// Allows `socket` only for `families`; refuses it otherwise. Its other calls jump past the
/// argument's load, so the call's number is still in the accumulator after.
fn socket_families(program: &mut Vec<Instruction>, socket: u32, families: &[u32]) {
    let n = u8::try_from(families.len()).unwrap_or(u8::MAX);
    program.push(op(JEQ, 0, n + 3, socket));
    program.push(op(LD_ABS, 0, 0, ARG0));
    for (i, family) in families.iter().enumerate() {
        // Past the rest of the list and the refusal, to the allow.
        let to_allow = n - u8::try_from(i).unwrap_or(0);
        program.push(op(JEQ, to_allow, 0, *family));
    }
    program.push(op(RET, 0, 0, errno(EPERM)));
    program.push(op(RET, 0, 0, ALLOW));
}

/// The filter, as the bytes bubblewrap reads from its `--seccomp` file descriptor; `None`
/// on an architecture it is not written for (the sandbox is then refused, never made
/// without it).
pub fn program(unix_sockets: bool) -> Option<Vec<u8>> {
    let calls = CALLS?;
    let mut program = vec![
        op(LD_ABS, 0, 0, ARCH),
        op(JEQ, 1, 0, calls.arch),
        op(RET, 0, 0, KILL_PROCESS),
        op(LD_ABS, 0, 0, NR),
        op(JGE, 0, 1, X32_BIT),
        op(RET, 0, 0, KILL_PROCESS),
    ];
    for call in calls.refused {
        program.extend([op(JEQ, 0, 1, *call), op(RET, 0, 0, errno(EPERM))]);
    }
    program.extend([op(JEQ, 0, 1, calls.clone3), op(RET, 0, 0, errno(ENOSYS))]);
    // Only the families a program needs: no vsock (a hypervisor's sockets, which no network
    // namespace separates), no packet, bluetooth or other family past the proxy.
    let families: &[u32] = if unix_sockets {
        &[AF_UNIX, AF_INET, AF_INET6, AF_NETLINK]
    } else {
        &[AF_INET, AF_INET6, AF_NETLINK]
    };
    socket_families(&mut program, calls.socket, families);
    if !unix_sockets {
        // A datagram pair's socket can still connect or send to any abstract address; a
        // stream pair's cannot (it is connected already), so only those are left.
        program.extend([
            op(JEQ, 0, 6, calls.socketpair),
            op(LD_ABS, 0, 0, ARG1),
            op(AND, 0, 0, SOCK_TYPE_MASK),
            op(JEQ, 2, 0, SOCK_DGRAM),
            op(JEQ, 1, 0, SOCK_SEQPACKET),
            op(RET, 0, 0, ALLOW),
            op(RET, 0, 0, errno(EPERM)),
        ]);
    }
    by_first_argument(&mut program, calls.clone, JSET, CLONE_NEW_ANY);
    program.push(op(RET, 0, 0, ALLOW));
    Some(
        program
            .iter()
            .flat_map(|i| {
                let mut bytes = Vec::with_capacity(8);
                bytes.extend_from_slice(&i.code.to_ne_bytes());
                bytes.push(i.jt);
                bytes.push(i.jf);
                bytes.extend_from_slice(&i.k.to_ne_bytes());
                bytes
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter as the kernel would on one call, for the tests: the verdict.
    fn verdict(bytes: &[u8], arch: u32, nr: u32, arg0: u32) -> u32 {
        verdict_with(bytes, arch, nr, arg0, 0)
    }

    fn verdict_with(bytes: &[u8], arch: u32, nr: u32, arg0: u32, arg1: u32) -> u32 {
        let program: Vec<Instruction> = bytes
            .chunks(8)
            .map(|c| Instruction {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = program[pc];
            pc += 1;
            match i.code {
                LD_ABS => {
                    acc = match i.k {
                        NR => nr,
                        ARCH => arch,
                        ARG0 => arg0,
                        ARG1 => arg1,
                        _ => panic!("unknown offset"),
                    }
                }
                AND => acc &= i.k,
                RET => return i.k,
                JEQ | JGE | JSET => {
                    let hit = match i.code {
                        JEQ => acc == i.k,
                        JGE => acc >= i.k,
                        _ => acc & i.k != 0,
                    };
                    pc += usize::from(if hit { i.jt } else { i.jf });
                }
                _ => panic!("unknown instruction"),
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_filter_refuses_what_it_names_and_allows_the_rest() {
        let x86 = 0xc000_003e;
        let shared = program(false).unwrap();
        let own = program(true).unwrap();
        for bytes in [&shared, &own] {
            // read, write, openat, execve, socketpair: allowed
            for nr in [0, 1, 257, 59, 53] {
                assert_eq!(verdict(bytes, x86, nr, 0), ALLOW, "{nr}");
            }
            for nr in [272, 308, 250, 248, 249, 425, 426, 427, 323, 321, 298] {
                assert_eq!(verdict(bytes, x86, nr, 0), errno(EPERM), "{nr}");
            }
            assert_eq!(verdict(bytes, x86, 435, 0), errno(ENOSYS));
            // clone of a thread or a process; clone into a new user or network namespace
            assert_eq!(verdict(bytes, x86, 56, 0x003d_0f00), ALLOW);
            assert_eq!(verdict(bytes, x86, 56, 0x0100_0011), ALLOW);
            assert_eq!(verdict(bytes, x86, 56, 0x1000_0000), errno(EPERM));
            assert_eq!(verdict(bytes, x86, 56, 0x4000_0011), errno(EPERM));
            // another ABI: killed
            assert_eq!(verdict(bytes, 0x4000_0003, 1, 0), KILL_PROCESS);
            assert_eq!(verdict(bytes, x86, X32_BIT | 1, 0), KILL_PROCESS);
            // inet, inet6 and netlink sockets; no vsock (40), packet (17), bluetooth (31),
            // alg (38), or anything else
            for family in [AF_INET, AF_INET6, AF_NETLINK] {
                assert_eq!(verdict(bytes, x86, 41, family), ALLOW, "{family}");
            }
            for family in [40, 17, 31, 38, 3, 4, 0, 45, 255] {
                assert_eq!(verdict(bytes, x86, 41, family), errno(EPERM), "{family}");
            }
            // after the family check, the clone check still reads the call's number
            assert_eq!(verdict(bytes, x86, 56, 0x1000_0000), errno(EPERM));
        }
        assert_eq!(verdict(&shared, x86, 41, AF_UNIX), errno(EPERM));
        // socketpair: a stream pair (with SOCK_CLOEXEC) stays; datagram and seqpacket do not
        assert_eq!(verdict_with(&shared, x86, 53, 1, 0x80001), ALLOW);
        assert_eq!(verdict_with(&shared, x86, 53, 1, 0x80002), errno(EPERM));
        assert_eq!(verdict_with(&shared, x86, 53, 1, 5), errno(EPERM));
        assert_eq!(verdict_with(&own, x86, 53, 1, 2), ALLOW);
        assert_eq!(verdict(&own, x86, 41, AF_UNIX), ALLOW);
        // after the socket check, the clone check still reads the call's number
        assert_eq!(verdict(&shared, x86, 56, 0x1000_0000), errno(EPERM));
    }
}
