//! Payload fields: big-endian integers and byte strings prefixed with their `u32` length, read
//! by a cursor that names the field it could not read.

use crate::frame::{FrameError, Kind};

pub(crate) fn put_u32(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(&n.to_be_bytes());
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
}

pub(crate) struct Cursor<'a> {
    kind: Kind,
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(kind: Kind, payload: &'a [u8]) -> Self {
        Self {
            kind,
            rest: payload,
        }
    }

    pub(crate) fn bad(&self, what: &'static str) -> FrameError {
        FrameError::Payload {
            kind: self.kind,
            what,
        }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FrameError> {
        if self.rest.len() < n {
            return Err(self.bad(what));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, FrameError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, FrameError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, FrameError> {
        let b = self.take(8, what)?;
        Ok(u64::from_be_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, FrameError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], FrameError> {
        let len = self.u32(what)?;
        self.take(usize::try_from(len).map_err(|_| self.bad(what))?, what)
    }

    /// A byte string that can be a C string (no NUL byte), as `execve` needs.
    pub(crate) fn c_bytes(&mut self, what: &'static str) -> Result<Vec<u8>, FrameError> {
        let bytes = self.bytes(what)?;
        if bytes.contains(&0) {
            return Err(self.bad(what));
        }
        Ok(bytes.to_vec())
    }

    /// A count of items, each at least `min_item` bytes: never more than the payload can hold,
    /// so a forged count cannot make the reader reserve memory for it.
    pub(crate) fn count(
        &mut self,
        min_item: usize,
        what: &'static str,
    ) -> Result<usize, FrameError> {
        let n = usize::try_from(self.u32(what)?).map_err(|_| self.bad(what))?;
        if n.saturating_mul(min_item) > self.rest.len() {
            return Err(self.bad(what));
        }
        Ok(n)
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    /// The payload must be used up: trailing bytes are a malformed frame.
    pub(crate) fn finish(self, what: &'static str) -> Result<(), FrameError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.bad(what))
        }
    }
}
