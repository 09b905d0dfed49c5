//! The kernel's version and the `requires-noeta` range check.

use semver::{Version, VersionReq};

/// The kernel's version, as plugins' `requires-noeta` ranges see it.
pub const KERNEL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The kernel's version, parsed.
pub fn kernel_version() -> Version {
    Version::parse(KERNEL_VERSION).unwrap_or_else(|_| Version::new(0, 0, 0))
}

/// The outcome of checking a `requires-noeta` range against a kernel version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeCheck {
    /// The version is in the range.
    Satisfied,
    /// The version is outside the range.
    Unsatisfied,
    /// The range is not a semver range; it is never enforced.
    Unparseable(String),
}

/// Checks a Cargo-flavoured semver range (`>=0.1, <2`, `^0.1`, `~0.1.2`, `*`) against `version`.
pub fn check_range(range: &str, version: &Version) -> RangeCheck {
    match VersionReq::parse(range) {
        Ok(req) if req.matches(version) => RangeCheck::Satisfied,
        Ok(_) => RangeCheck::Unsatisfied,
        Err(err) => RangeCheck::Unparseable(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_starts_at_0_1_0() {
        assert_eq!(kernel_version(), Version::new(0, 1, 0));
    }

    #[test]
    fn ranges_are_cargo_flavoured() {
        let v = Version::new(0, 1, 0);
        assert_eq!(check_range(">=0.1, <2", &v), RangeCheck::Satisfied);
        assert_eq!(check_range("^0.1", &v), RangeCheck::Satisfied);
        assert_eq!(check_range(">=0.2", &v), RangeCheck::Unsatisfied);
        assert!(matches!(
            check_range("newest please", &v),
            RangeCheck::Unparseable(_)
        ));
    }
}
