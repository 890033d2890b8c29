//! Messages gathered for a hand-over between a thread and the runtime: one hand-over per batch
//! instead of several per small file. A batch holds at most `limit` bytes of bodies (one chunk's
//! worth), so a queue bounded in batches stays bounded in bytes as it was in chunks.

/// Messages in one batch at most (a tree of empty files is all headers).
const BATCH_MESSAGES: usize = 256;

pub struct Batch<T> {
    messages: Vec<T>,
    bytes: u64,
    limit: u64,
}

impl<T> Batch<T> {
    pub fn new(limit: u64) -> Self {
        Self {
            messages: Vec::new(),
            bytes: 0,
            limit: limit.max(1),
        }
    }

    /// Adds `message`, which carries `bytes` of body; returns what was gathered before it when
    /// `message` would not fit with it (the caller hands that over first).
    pub fn add(&mut self, message: T, bytes: u64) -> Option<Vec<T>> {
        let full = (self.messages.len() >= BATCH_MESSAGES
            || (!self.messages.is_empty() && self.bytes + bytes > self.limit))
            .then(|| self.take());
        self.messages.push(message);
        self.bytes += bytes;
        full
    }

    /// Everything gathered, or `None` when nothing is.
    pub fn rest(&mut self) -> Option<Vec<T>> {
        (!self.messages.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> Vec<T> {
        self.bytes = 0;
        std::mem::take(&mut self.messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_close_at_the_byte_limit_and_the_message_count() {
        let mut batch = Batch::new(10);
        assert_eq!(batch.add('a', 4), None);
        assert_eq!(batch.add('b', 6), None);
        assert_eq!(batch.add('c', 1), Some(vec!['a', 'b']));
        // A message larger than the limit goes alone.
        assert_eq!(batch.add('d', 50), Some(vec!['c']));
        assert_eq!(batch.add('e', 0), Some(vec!['d']));
        assert_eq!(batch.rest(), Some(vec!['e']));
        assert_eq!(batch.rest(), None);
        let mut many = Batch::new(10);
        let handed: Vec<Vec<u32>> = (0..600).filter_map(|i| many.add(i, 0)).collect();
        assert_eq!(
            handed.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![256, 256]
        );
        assert_eq!(many.rest().map(|rest| rest.len()), Some(88));
    }
}
