//! What `cargo install --path crates/agentloop-cli` resolves without `--locked`: crates that
//! must move together are pinned together, so that a fresh resolution stays on the versions
//! the tests ran with. (Checked by hand with `cargo update --dry-run`, which resolves the same
//! way: before the pin, rmcp-macros moved from 3.9.0 to 3.11.0 under the pinned rmcp 3.9.0.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

fn read(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A dependency's version requirement, written as `"1"` or `{ version = "1", ... }`.
fn requirement(dependencies: &toml::Table, name: &str) -> String {
    match dependencies.get(name) {
        Some(toml::Value::String(version)) => version.clone(),
        Some(toml::Value::Table(table)) => table["version"].as_str().unwrap().to_string(),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn rmcp_macros_is_pinned_to_the_pinned_rmcp_for_installs_without_the_lock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = read(&root.join("Cargo.toml"));
    let dependencies = workspace["workspace"]["dependencies"].as_table().unwrap();
    let rmcp = requirement(dependencies, "rmcp");
    assert!(rmcp.starts_with('='), "rmcp is pinned: {rmcp}");
    assert_eq!(requirement(dependencies, "rmcp-macros"), rmcp);

    // A workspace entry takes part in resolving only when a member uses it.
    let cli = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
    assert!(
        cli["dev-dependencies"].get("rmcp-macros").is_some(),
        "agentloop-cli holds the pin"
    );

    let lock = read(&root.join("Cargo.lock"));
    let version = |name: &str| {
        lock["package"]
            .as_array()
            .unwrap()
            .iter()
            .find(|package| package["name"].as_str() == Some(name))
            .and_then(|package| package["version"].as_str())
            .unwrap_or_else(|| panic!("{name} is not in Cargo.lock"))
            .to_string()
    };
    assert_eq!(version("rmcp-macros"), version("rmcp"));
    assert_eq!(format!("={}", version("rmcp")), rmcp);
}
