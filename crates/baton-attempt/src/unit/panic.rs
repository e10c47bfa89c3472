//! A unit that panics (a bug in baton) must still end as an attempt: its task would otherwise
//! be lost track of, running forever in the scheduler's eyes.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// `future`, with a panic while it is polled turned into `Err(message)`.
pub(super) struct CatchPanic<F> {
    future: Pin<Box<F>>,
}

impl<F: Future> CatchPanic<F> {
    pub(super) fn new(future: F) -> Self {
        Self {
            future: Box::pin(future),
        }
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The future is never polled again after a panic: whatever state it left is dropped
        // with it, so nothing observes it half-updated.
        match catch_unwind(AssertUnwindSafe(|| self.future.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Poll::Ready(Err(message))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message_and_a_value_passes() {
        assert_eq!(CatchPanic::new(async { 7 }).await, Ok(7));
        let panicked = CatchPanic::new(async {
            if true {
                panic!("broken invariant");
            }
        })
        .await;
        assert_eq!(panicked, Err("broken invariant".to_owned()));
    }
}
