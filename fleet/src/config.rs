//! The fleet config file (YAML): SSH settings, sites with their units, subnet rules and
//! poles. Relative paths are relative to the config file's directory.

use serde::Deserialize;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading fleet config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("fleet config {path}: {detail}")]
    Parse { path: PathBuf, detail: String },
    #[error("fleet config {path}: {detail}")]
    Invalid { path: PathBuf, detail: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshConfig {
    #[serde(default = "default_user")]
    pub user: String,
    /// Private key the image builder's public key pairs with.
    #[serde(default)]
    pub identity: Option<PathBuf>,
    /// The only host keys accepted; unknown or changed keys are refused.
    #[serde(default = "default_known_hosts")]
    pub known_hosts: PathBuf,
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_s: u64,
    #[serde(default = "default_command_timeout")]
    pub command_timeout_s: u64,
    #[serde(default = "default_ssh")]
    pub ssh: PathBuf,
    #[serde(default = "default_ssh_port")]
    pub port: u16,
}

fn default_user() -> String {
    "pfx".into()
}
fn default_known_hosts() -> PathBuf {
    "/etc/pfx/fleet/known_hosts".into()
}
fn default_connect_timeout() -> u64 {
    5
}
fn default_command_timeout() -> u64 {
    60
}
fn default_ssh() -> PathBuf {
    "ssh".into()
}
fn default_ssh_port() -> u16 {
    22
}
/// Nothing: on an image the fleet account's forced command is the agent's dispatcher, so
/// the remote command is the verb alone (`apply pause-off --json`).
fn default_agent() -> String {
    String::new()
}

impl Default for SshConfig {
    fn default() -> Self {
        SshConfig {
            user: default_user(),
            identity: None,
            known_hosts: default_known_hosts(),
            connect_timeout_s: default_connect_timeout(),
            command_timeout_s: default_command_timeout(),
            ssh: default_ssh(),
            port: default_ssh_port(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitConfig {
    pub id: String,
    pub host: String,
    #[serde(default)]
    pub port: Option<u16>,
    /// Overrides the fleet-wide agent command for this unit.
    #[serde(default)]
    pub agent_command: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoleConfig {
    pub id: String,
    /// Base URL of the pole management API, e.g. http://10.20.0.51:8081
    pub url: String,
    #[serde(default)]
    pub canary: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    pub name: String,
    /// File holding the site's pole API token (never printed or logged).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Discovered units whose address is in one of these IPv4 CIDRs belong to the site.
    #[serde(default)]
    pub subnets: Vec<String>,
    #[serde(default)]
    pub units: Vec<UnitConfig>,
    #[serde(default)]
    pub poles: Vec<PoleConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    #[serde(default)]
    pub ssh: SshConfig,
    /// Prefix of the remote command, before the verb. Empty (the default) for image units:
    /// their forced command runs the agent and refuses anything but a bare verb. Only a
    /// host without that forced command (set up by hand) needs a command here.
    #[serde(default = "default_agent")]
    pub agent_command: String,
    #[serde(default)]
    pub state_db: Option<PathBuf>,
    #[serde(default)]
    pub sites: Vec<SiteConfig>,
}

/// An IPv4 CIDR such as `10.20.0.0/24`.
pub fn parse_cidr(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (a, n) = s.split_once('/')?;
    let n: u8 = n.parse().ok()?;
    (n <= 32).then_some(())?;
    Some((a.parse().ok()?, n))
}

pub fn cidr_contains((net, len): (Ipv4Addr, u8), ip: Ipv4Addr) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(net) & mask == u32::from(ip) & mask
}

impl FleetConfig {
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut c: FleetConfig = serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            detail: e.to_string(),
        })?;
        let invalid = |detail: String| ConfigError::Invalid {
            path: path.into(),
            detail,
        };
        let mut seen = std::collections::HashSet::new();
        for s in &c.sites {
            for n in &s.subnets {
                parse_cidr(n).ok_or_else(|| {
                    invalid(format!(
                        "site {}: subnet {n:?} is not an IPv4 CIDR like 10.20.0.0/24",
                        s.name
                    ))
                })?;
            }
            for u in &s.units {
                if !seen.insert(u.id.clone()) {
                    return Err(invalid(format!("unit {} is listed twice", u.id)));
                }
            }
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let rel = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        rel(&mut c.ssh.known_hosts);
        if let Some(i) = c.ssh.identity.as_mut() {
            rel(i);
        }
        if let Some(d) = c.state_db.as_mut() {
            rel(d);
        }
        for s in &mut c.sites {
            if let Some(t) = s.token_file.as_mut() {
                rel(t);
            }
        }
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        Self::parse(&text, path)
    }

    pub fn site(&self, name: &str) -> Option<&SiteConfig> {
        self.sites.iter().find(|s| s.name == name)
    }

    /// The site a discovered unit belongs to: an explicit listing wins, then the first
    /// subnet rule that contains its address.
    pub fn site_for(&self, unit_id: &str, addr: Option<Ipv4Addr>) -> Option<String> {
        if let Some(s) = self
            .sites
            .iter()
            .find(|s| s.units.iter().any(|u| u.id == unit_id))
        {
            return Some(s.name.clone());
        }
        let ip = addr?;
        self.sites
            .iter()
            .find(|s| {
                s.subnets
                    .iter()
                    .filter_map(|n| parse_cidr(n))
                    .any(|c| cidr_contains(c, ip))
            })
            .map(|s| s.name.clone())
    }

    /// The one lookup of a unit's agent command: its own `agent_command` in the config,
    /// else the fleet-wide one (a discovered unit has only that).
    pub fn unit_agent_command(&self, unit_id: &str) -> String {
        self.sites
            .iter()
            .flat_map(|s| s.units.iter())
            .find(|u| u.id == unit_id)
            .and_then(|u| u.agent_command.clone())
            .unwrap_or_else(|| self.agent_command.clone())
    }

    /// Every configured unit's agent command, resolved once, for worker threads that do
    /// not hold the config.
    pub fn agent_commands(&self) -> AgentCommands {
        AgentCommands {
            own: self
                .sites
                .iter()
                .flat_map(|s| s.units.iter())
                .map(|u| (u.id.clone(), self.unit_agent_command(&u.id)))
                .collect(),
            fleet: self.agent_command.clone(),
        }
    }
}

/// Each unit's agent command as [`FleetConfig::unit_agent_command`] resolves it, owned.
#[derive(Debug, Clone)]
pub struct AgentCommands {
    own: std::collections::BTreeMap<String, String>,
    fleet: String,
}

impl AgentCommands {
    /// The unit's agent command (the fleet-wide one for a unit not in the config).
    pub fn prefix(&self, unit_id: &str) -> &str {
        self.own.get(unit_id).unwrap_or(&self.fleet)
    }

    /// What goes over SSH to the unit for `verb`.
    pub fn remote(&self, unit_id: &str, verb: &str) -> String {
        remote_command(self.prefix(unit_id), verb)
    }
}

/// The one place a remote command is built: the verb alone for image units (their forced
/// command is the agent's dispatcher, which refuses anything else), after the configured
/// prefix otherwise.
pub fn remote_command(prefix: &str, verb: &str) -> String {
    match prefix.trim() {
        "" => verb.to_string(),
        p => format!("{p} {verb}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Y: &str = "
ssh:
  user: root
  known_hosts: ./known_hosts
  identity: ./id_ed25519
agent_command: /usr/bin/pfx-agent --nic-backend mock
sites:
  - name: hall-a
    token_file: ./hall-a.token
    subnets: [10.20.0.0/24]
    units:
      - {id: u1, host: 10.20.0.11}
      - {id: u2, host: 10.20.0.12, port: 2222, agent_command: sleep 1; pfx-agent}
    poles:
      - {id: p1, url: 'http://10.20.0.51:8081', canary: true}
  - name: hall-b
    subnets: [10.30.0.0/16]
";

    #[test]
    fn parses_sites_units_poles_and_resolves_relative_paths() {
        let c = FleetConfig::parse(Y, Path::new("/etc/pfx/fleet/fleet.yaml")).unwrap();
        assert_eq!(c.ssh.user, "root");
        assert_eq!(c.ssh.known_hosts, Path::new("/etc/pfx/fleet/./known_hosts"));
        assert_eq!(c.sites[0].units[1].port, Some(2222));
        assert!(c.sites[0].poles[0].canary);
        assert_eq!(c.unit_agent_command("u2"), "sleep 1; pfx-agent");
        let a = c.agent_commands();
        assert_eq!(a.prefix("u2"), "sleep 1; pfx-agent");
        assert_eq!(a.prefix("discovered"), c.agent_command);
        assert_eq!(
            a.remote("u2", "show status"),
            "sleep 1; pfx-agent show status"
        );
        assert_eq!(
            c.unit_agent_command("u1"),
            "/usr/bin/pfx-agent --nic-backend mock"
        );
        assert_eq!(c.ssh.connect_timeout_s, 5);
        let d = FleetConfig::parse("sites: []", Path::new("f.yaml")).unwrap();
        assert_eq!((d.ssh.user.as_str(), d.agent_command.as_str()), ("pfx", ""));
    }

    #[test]
    fn sites_from_explicit_units_then_subnets() {
        let c = FleetConfig::parse(Y, Path::new("f.yaml")).unwrap();
        assert_eq!(c.site_for("u1", None).as_deref(), Some("hall-a"));
        assert_eq!(
            c.site_for("x", Some("10.30.4.5".parse().unwrap()))
                .as_deref(),
            Some("hall-b")
        );
        assert_eq!(
            c.site_for("x", Some("10.20.0.99".parse().unwrap()))
                .as_deref(),
            Some("hall-a")
        );
        assert_eq!(c.site_for("x", Some("10.21.0.1".parse().unwrap())), None);
    }

    #[test]
    fn rejects_bad_subnets_duplicates_and_unknown_fields() {
        let p = Path::new("f.yaml");
        assert!(FleetConfig::parse("sites: [{name: a, subnets: [10.0.0.0/33]}]", p).is_err());
        assert!(
            FleetConfig::parse(
                "sites: [{name: a, units: [{id: u, host: h}, {id: u, host: i}]}]",
                p
            )
            .is_err()
        );
        let e = FleetConfig::parse("sitez: []", p).unwrap_err().to_string();
        assert!(e.contains("f.yaml"), "{e}");
    }

    #[test]
    fn cidr_math() {
        let c = parse_cidr("10.20.0.0/24").unwrap();
        assert!(cidr_contains(c, "10.20.0.255".parse().unwrap()));
        assert!(!cidr_contains(c, "10.20.1.0".parse().unwrap()));
        assert!(cidr_contains(
            parse_cidr("0.0.0.0/0").unwrap(),
            "1.2.3.4".parse().unwrap()
        ));
        assert!(parse_cidr("10.0.0.0").is_none());
    }
}
