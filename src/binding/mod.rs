//! The only napi code: converts between JS values and the core, nothing else.

mod constants;
mod js_value;
mod parsers;
