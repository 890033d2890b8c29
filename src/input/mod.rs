//! Untrusted input: the captured value, the readers that check it, and the issues they find.

pub mod issues;
pub mod read;
pub mod value;

pub use issues::{child, render_path, Issue, IssueCode, Issues, Path, Seg};
pub use value::{Refusal, ToValue, Value};
