//! A task that ends with its owner: dropping the guard aborts the task (a finished task is
//! unaffected).

pub(super) struct AbortOnDrop(pub tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
