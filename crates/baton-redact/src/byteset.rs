//! A set of bytes, for the hand-written scans that continue a match.

/// Membership of each of the 256 byte values.
#[derive(Debug)]
pub(crate) struct ByteSet([bool; 256]);

impl ByteSet {
    /// Parses a character-class body such as `A-Za-z0-9_-`: `x-y` is a range, a `-` at the end
    /// is itself, and `\` takes the next byte literally.
    pub(crate) const fn new(spec: &[u8]) -> ByteSet {
        let mut set = [false; 256];
        let mut i = 0;
        while i < spec.len() {
            let mut lo = spec[i];
            if lo == b'\\' && i + 1 < spec.len() {
                i += 1;
                lo = spec[i];
            }
            if i + 2 < spec.len() && spec[i + 1] == b'-' {
                let hi = spec[i + 2];
                let mut b = lo;
                while b <= hi {
                    set[b as usize] = true;
                    if b == u8::MAX {
                        break;
                    }
                    b += 1;
                }
                i += 3;
            } else {
                set[lo as usize] = true;
                i += 1;
            }
        }
        ByteSet(set)
    }

    /// Every byte that is not in `self`.
    pub(crate) const fn negate(self) -> ByteSet {
        let mut set = self.0;
        let mut i = 0;
        while i < 256 {
            set[i] = !set[i];
            i += 1;
        }
        ByteSet(set)
    }

    pub(crate) fn contains(&self, byte: u8) -> bool {
        self.0[usize::from(byte)]
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSet;

    #[test]
    fn ranges_and_trailing_dash() {
        let set = ByteSet::new(b"A-Za-z0-9_-");
        for b in b"AZaz09_-" {
            assert!(set.contains(*b), "{}", *b as char);
        }
        for b in b"+/. \n" {
            assert!(!set.contains(*b), "{}", *b as char);
        }
    }

    #[test]
    fn escape_and_negation() {
        let set = ByteSet::new(b" \t\r\n\\\\\"").negate();
        assert!(!set.contains(b'\\'));
        assert!(!set.contains(b'"'));
        assert!(set.contains(b'a'));
        assert!(set.contains(0xff));
    }
}
