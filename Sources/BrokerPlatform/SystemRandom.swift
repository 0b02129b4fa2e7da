import CBrokerPlatform

#if canImport(Glibc)
import Glibc
#endif

/// Random bytes from the kernel's CSPRNG, many in one call: `SystemRandomNumberGenerator` makes a system call per
/// eight bytes.
public enum SystemRandom {
    /// `count` random bytes (getrandom, which waits only until the kernel's generator is first seeded).
    public static func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            while initialized < count {
                let got = brokerd_random_bytes(buffer.baseAddress! + initialized, UInt(count - initialized))
                if got < 0 {
                    // Only EINTR (a signal during a large request) or a kernel without getrandom (before 3.17,
                    // which brokerd does not run on) come here.
                    precondition(errno == EINTR, "getrandom failed: errno \(errno)")
                    continue
                }
                initialized += got
            }
        }
    }
}
