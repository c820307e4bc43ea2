//! loaderx-crashtest: the store's crash safety on the real Linux kernel.
//!
//! A workload of store operations ([`workload`]) runs in a QEMU guest on a
//! filesystem over a dm-log-writes target, which logs every block write,
//! flush and FUA write in completion order, and a mark after each
//! acknowledged operation. The log ([`log`]) is then replayed ([`replay`])
//! to every flush point, every mark and sampled states between flushes;
//! each state is mounted (journal recovery included) and checked
//! ([`check`]) against the model. [`guest`] runs all of it in the guest;
//! [`watchdog`] ends a run whose step stops making progress.
//! See `docs/crash-safety.md`, "On the real kernel".

pub mod check;
pub mod guest;
pub mod log;
pub mod replay;
pub mod table;
pub mod watchdog;
pub mod workload;
