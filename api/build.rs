//! The dashboard's built assets (`web/dist`) are embedded with `include_dir!`, which cargo does
//! not track: rebuild this crate when they change.

fn main() {
    println!("cargo:rerun-if-changed=../web/dist");
}
