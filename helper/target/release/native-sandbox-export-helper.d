/work/main/helper/target/release/native-sandbox-export-helper: /work/main/helper/src/main.rs
