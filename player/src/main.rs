// TEMPORARY (fseq branch): only `seq`, so the FSEQ reader can be tried end to end.
// The lead's real main.rs replaces this with `Seq(cli::seq::SeqArgs)` among the others.
use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "pfx-player")]
enum Cli {
    /// Look inside FSEQ sequence files.
    Seq(pfx_player::cli::seq::SeqArgs),
}

fn main() -> std::process::ExitCode {
    match Cli::parse() {
        Cli::Seq(a) => match pfx_player::cli::seq::run(a) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pfx-player: {e:#}");
                std::process::ExitCode::from(1)
            }
        },
    }
}
