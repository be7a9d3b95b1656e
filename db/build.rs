// `sqlx::migrate!` embeds db/migrations at compile time: a new or changed migration must
// rebuild this crate even when no Rust source changed.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
