//! CPU time and peak memory of this process, from `getrusage(RUSAGE_SELF)`.

/// User+system CPU seconds and `ru_maxrss` (KiB on Linux).
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub cpu_s: f64,
    pub max_rss_kib: i64,
}

pub fn now() -> Usage {
    // SAFETY: getrusage only writes the struct it is given; a zeroed rusage is a valid value.
    let mut raw: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut raw) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        cpu_s: seconds(raw.ru_utime) + seconds(raw.ru_stime),
        max_rss_kib: raw.ru_maxrss,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_grows_and_rss_is_reported() {
        let before = super::now();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let after = super::now();
        assert!(after.cpu_s >= before.cpu_s);
        assert!(after.max_rss_kib > 0);
    }
}
