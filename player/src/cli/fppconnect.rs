//! `pfx-player fpp-connect hash-password`: the argon2 hash for `fpp_connect.password_hash`.

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Args, Debug)]
pub struct FppConnectArgs {
    #[command(subcommand)]
    pub cmd: FppConnectCmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum FppConnectCmd {
    /// Read a password from the first line of stdin and print its argon2id hash, for
    /// `fpp_connect.password_hash` in the show config. The password itself is never stored.
    HashPassword,
}

pub fn run(args: FppConnectArgs) -> anyhow::Result<ExitCode> {
    match args.cmd {
        FppConnectCmd::HashPassword => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("cannot read the password from stdin")?;
            let pw = line.trim_end_matches(['\n', '\r']);
            if pw.is_empty() {
                anyhow::bail!(
                    "empty password: type it on stdin, e.g. `read -rs PW; printf '%s\\n' \"$PW\" | pfx-player fpp-connect hash-password`"
                );
            }
            let h = crate::fppconnect::auth::hash_password(pw).map_err(anyhow::Error::msg)?;
            println!("{h}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
