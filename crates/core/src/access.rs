//! Who a call acts for: the access layer ([`crate::auth`]) decides a
//! token's roles before a call reaches an adapter, and hands the call the
//! [`Caller`] its token makes it, which the adapters pass into every engine
//! operation that acts for a worker (claims work, starts an attempt, writes
//! an attempt's worker, heartbeats a worker, opens its session). The engine
//! checks the worker binding there, once, so no adapter can forget it.

use std::fmt;
use std::sync::Arc;

use super::error::{StoreError, StoreResult, echo};

/// Told of each request refused for acting for another worker (the access
/// layer counts them).
pub trait RefusalSink: Send + Sync + fmt::Debug {
    /// Records one refusal.
    fn worker_refused(&self);
}

/// What a token may do for workers, by its binding.
#[derive(Debug, Clone)]
struct Binding {
    /// The token's label for logs and refusals (never the token).
    token: Arc<str>,
    /// The only worker ids the token may act for.
    workers: Arc<[Box<str>]>,
    refusals: Arc<dyn RefusalSink>,
}

/// The party a call acts for.
#[derive(Debug, Clone, Default)]
pub struct Caller(Option<Binding>);

impl Caller {
    /// A caller that may act for any worker: a token bound to no worker,
    /// or any call when the port has no tokens.
    pub fn anyone() -> Self {
        Self(None)
    }

    /// A caller whose token (labelled `token`) may act for `workers` only;
    /// each refusal is told to `refusals`.
    pub fn bound(
        token: Arc<str>,
        workers: Arc<[Box<str>]>,
        refusals: Arc<dyn RefusalSink>,
    ) -> Self {
        Self(Some(Binding {
            token,
            workers,
            refusals,
        }))
    }

    /// Checks that the caller may act for `worker_id` (`None`: the request
    /// names no worker, which any caller may do).
    pub fn check_worker(&self, worker_id: Option<&str>) -> StoreResult<()> {
        let (Some(binding), Some(worker_id)) = (&self.0, worker_id) else {
            return Ok(());
        };
        if binding.workers.iter().any(|bound| &**bound == worker_id) {
            return Ok(());
        }
        binding.refused(format!(
            "token {:?} may not act for worker {:?}",
            &*binding.token,
            echo(worker_id)
        ))
    }

    /// As [`Caller::check_worker`], for calls that take work: a caller
    /// bound to workers must name one of them.
    pub fn check_worker_named(&self, worker_id: Option<&str>) -> StoreResult<()> {
        match (&self.0, worker_id) {
            (Some(binding), None) => binding.refused(format!(
                "token {:?} is bound to workers: name one (worker_id)",
                &*binding.token
            )),
            _ => self.check_worker(worker_id),
        }
    }
}

impl Binding {
    fn refused(&self, message: String) -> StoreResult<()> {
        self.refusals.worker_refused();
        tracing::debug!(token = &*self.token, "token refused for another worker");
        Err(StoreError::PermissionDenied(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, Default)]
    struct Count(AtomicUsize);

    impl RefusalSink for Count {
        fn worker_refused(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_bound_caller_acts_for_its_workers_only() {
        let count = Arc::new(Count::default());
        let caller = Caller::bound(
            "runner-1".into(),
            Arc::from(vec!["w-1".into()]),
            count.clone(),
        );
        assert!(caller.check_worker(Some("w-1")).is_ok());
        assert!(caller.check_worker(None).is_ok());
        assert!(matches!(
            caller.check_worker(Some("w-2")),
            Err(StoreError::PermissionDenied(m)) if m.contains("\"w-2\"")
        ));
        assert!(caller.check_worker_named(None).is_err());
        assert!(caller.check_worker_named(Some("w-1")).is_ok());
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        assert!(Caller::anyone().check_worker_named(None).is_ok());
        assert!(Caller::anyone().check_worker(Some("w-9")).is_ok());
    }
}
