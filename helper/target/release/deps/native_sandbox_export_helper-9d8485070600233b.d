/work/main/helper/target/release/deps/native_sandbox_export_helper-9d8485070600233b.d: src/main.rs

/work/main/helper/target/release/deps/native_sandbox_export_helper-9d8485070600233b: src/main.rs

src/main.rs:
