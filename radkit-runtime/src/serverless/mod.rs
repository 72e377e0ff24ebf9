//! One pass per invocation: the task machine hosted by a function that lives for one event. The
//! host itself is [`Passes`] (see its module docs in `engine/pass.rs`): lease, load, resume, apply
//! the event, run what fits before the deadline, persist, return.

pub use crate::engine::{
    with_deadline, Executed, Executor, PassError, PassEvent as Event, Passed, Passes, Rest,
    DEFAULT_LEASE_MARGIN, DISPATCH_RECHECK,
};

#[cfg(feature = "lambda")]
#[cfg_attr(docsrs, doc(cfg(feature = "lambda")))]
pub mod lambda;
