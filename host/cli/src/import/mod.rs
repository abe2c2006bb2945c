//! `tessera import`: import into a Tessera cluster through its proxy (redis-port, after Codis).
//! `restore` writes an RDB file; `sync` joins a Redis server as a replica (PSYNC), loads the
//! RDB it sends and then applies its live command stream, resuming from a saved offset.
//!
//! Every key is written with ordinary commands (`apply`) through a proxy (`target`), so it
//! takes the proxy's slot routing and plugins. The dump parser (`rdb`, `input`, `stream`, `encoding`,
//! `lzf`, `crc64`) is our own: the `rdb` crate (0.3) knows no FUNCTION2 opcode, reads every
//! `0x80`/`0x81` length as 32 bits (64-bit lengths misparse) and hands values to a formatter
//! as it goes (so a bad file is found after part of it is written); `librdb` wraps a C
//! library. Ours is written to be safe on hostile files.

pub mod apply;
pub mod crc64;
pub mod encoding;
pub mod from_backup;
pub mod input;
pub mod load;
pub mod lzf;
pub mod progress;
pub mod rdb;
pub mod restore;
pub mod settings;
pub mod state;
pub mod stream;
pub mod sync;
pub mod target;
pub mod value;

pub use rdb::{Parser, RdbError};
pub use value::{Entry, Item, Value};

/// `tessera import` arguments.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub command: ImportCmd,
}

/// `tessera import` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ImportCmd {
    /// Import an RDB file through a Tessera proxy (checked whole before anything is written).
    Restore(restore::RestoreArgs),
    /// Replicate a Redis server into a Tessera proxy: full copy, then its live writes, until
    /// Ctrl-C; resumes from --state after a restart.
    Sync(sync::SyncArgs),
}

/// Runs `tessera import …` on its own runtime.
///
/// # Errors
/// Whatever stopped the import, with context.
pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        match args.command {
            ImportCmd::Restore(a) => restore::run(a).await,
            ImportCmd::Sync(a) => sync::run(a).await,
        }
    })
}
