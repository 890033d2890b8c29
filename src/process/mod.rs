//! The one native process of a sandbox: its recipe.

pub mod spec;
