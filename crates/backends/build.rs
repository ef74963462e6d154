//! `sqlx::migrate!` embeds `migrations/` but cannot tell cargo about a new
//! file: without this line, adding one would not rebuild the crate.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
