//! The real `pfx-player nic status --json` output is exactly what pfx-api's `NicStatus`
//! writes: read it as the type, write it back, compare bytes. With the golden-file test in
//! `nic/mod.rs` (field names and order) and the fleet's reading of that file, the contract
//! holds from the binary's stdout to the agent.

use pfx_api::nic::NicStatus;

#[test]
fn nic_status_json_from_the_binary_is_the_api_type() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pfx-player"))
        .args(["nic", "status", "lo", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let s: NicStatus =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not a NicStatus ({e}): {stdout}"));
    assert_eq!(s.interface, "lo");
    assert_eq!(serde_json::to_string_pretty(&s).unwrap() + "\n", stdout);
}
