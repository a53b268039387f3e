//! Reads the built image FILE back (never the staging directory): the FAT partition with
//! mtools at its byte offset, the ext4 root and the ext4 data partition with debugfs at
//! their byte offsets.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::verify::{self, Partition};

#[derive(Debug, thiserror::Error)]
#[error("{image}: {message}")]
pub struct ReadError {
    pub image: PathBuf,
    pub message: String,
}

pub struct ImageFile {
    pub path: PathBuf,
    pub partitions: Vec<Partition>,
    pub boot: Partition,
    /// Root slot A: the root the image boots first and the one a bundle is made from.
    pub root: Partition,
    /// Root slot B (empty in a fresh image), when the table has one.
    pub root_b: Option<Partition>,
    /// The last Linux partition after the slots, when there is one.
    pub data: Option<Partition>,
}

fn run(cmd: &mut Command) -> Result<(Vec<u8>, String, bool), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    Ok((
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    ))
}

impl ImageFile {
    pub fn open(path: &Path) -> Result<ImageFile, ReadError> {
        let err = |message: String| ReadError {
            image: path.to_path_buf(),
            message,
        };
        let mut f = std::fs::File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
        let mut s0 = [0u8; 512];
        f.read_exact(&mut s0)
            .map_err(|e| err(format!("cannot read the first sector: {e}")))?;
        let partitions = verify::parse_mbr(&s0).map_err(|e| err(e.to_string()))?;
        let boot = partitions
            .iter()
            .find(|p| p.kind == 0x0c || p.kind == 0x0b)
            .copied();
        let linux: Vec<Partition> = partitions
            .iter()
            .filter(|p| p.kind == 0x83)
            .copied()
            .collect();
        // Boot, A, B, data; an image of the older layout (boot, root, data) still opens, so
        // that verify can say what is missing instead of reading slot B as the data.
        let (root_b, data) = match linux.len() {
            0 | 1 => (None, None),
            2 => (None, Some(linux[1])),
            _ => (Some(linux[1]), linux.last().copied()),
        };
        match (boot, linux.first().copied()) {
            (Some(boot), Some(root)) => Ok(ImageFile {
                path: path.to_path_buf(),
                partitions,
                boot,
                root,
                root_b,
                data,
            }),
            _ => Err(err(format!(
                "expected a FAT (0x0c) and a Linux (0x83) partition, found {partitions:?}"
            ))),
        }
    }

    fn err(&self, message: String) -> ReadError {
        ReadError {
            image: self.path.clone(),
            message,
        }
    }

    fn fat_spec(&self) -> String {
        format!("{}@@{}", self.path.display(), self.boot.offset())
    }

    fn ext4_spec(&self, part: &Partition) -> String {
        format!("{}?offset={}", self.path.display(), part.offset())
    }

    /// Every file on the FAT partition, paths without the leading `::/`.
    pub fn fat_files(&self) -> Result<Vec<String>, ReadError> {
        let (out, errs, ok) = run(Command::new("mdir").env("MTOOLS_SKIP_CHECK", "1").args([
            "-/",
            "-b",
            "-i",
            &self.fat_spec(),
            "::/",
        ]))
        .map_err(|m| self.err(m))?;
        if !ok {
            return Err(self.err(format!("mdir on the boot partition failed: {errs}")));
        }
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.strip_prefix("::/"))
            .filter(|l| !l.ends_with('/') && !l.is_empty())
            .map(str::to_string)
            .collect())
    }

    pub fn fat_read(&self, name: &str) -> Result<Vec<u8>, ReadError> {
        let (out, errs, ok) = run(Command::new("mcopy").env("MTOOLS_SKIP_CHECK", "1").args([
            "-n",
            "-i",
            &self.fat_spec(),
            &format!("::{name}"),
            "-",
        ]))
        .map_err(|m| self.err(m))?;
        if !ok {
            return Err(self.err(format!(
                "boot partition: cannot read {name}: {}",
                errs.trim()
            )));
        }
        Ok(out)
    }

    fn debugfs(&self, request: &str) -> Result<(Vec<u8>, String), ReadError> {
        self.debugfs_on(&self.root, request)
    }

    fn debugfs_on(&self, part: &Partition, request: &str) -> Result<(Vec<u8>, String), ReadError> {
        let (out, errs, ok) =
            run(Command::new("debugfs").args(["-R", request, &self.ext4_spec(part)]))
                .map_err(|m| self.err(m))?;
        if !ok {
            return Err(self.err(format!("debugfs {request:?} failed: {errs}")));
        }
        Ok((out, errs))
    }

    /// A file of the root file system. debugfs exits 0 on a missing file; its stderr says so.
    pub fn root_read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        let (out, errs) = self.debugfs(&format!("cat {path}"))?;
        if errs.contains("not found") || errs.contains("File not found") {
            return Err(self.err(format!("root file system: {path} not found")));
        }
        Ok(out)
    }

    pub fn root_ls(&self, dir: &str) -> Result<Vec<String>, ReadError> {
        let (out, errs) = self.debugfs(&format!("ls -p {dir}"))?;
        if errs.contains("not found") {
            return Err(self.err(format!("root file system: {dir} not found")));
        }
        Ok(verify::parse_debugfs_ls(&String::from_utf8_lossy(&out)))
    }

    /// `(mode, uid)` of a file in the root file system; None when it is missing.
    pub fn root_stat(&self, path: &str) -> Result<Option<(u32, u32)>, ReadError> {
        let (out, errs) = self.debugfs(&format!("stat {path}"))?;
        if errs.contains("not found") {
            return Ok(None);
        }
        Ok(verify::parse_debugfs_stat(&String::from_utf8_lossy(&out)))
    }

    /// The target of a symlink in the root file system (None when not a symlink or missing).
    pub fn root_symlink(&self, path: &str) -> Result<Option<String>, ReadError> {
        let (out, _) = self.debugfs(&format!("stat {path}"))?;
        let text = String::from_utf8_lossy(&out);
        if !text.contains("Type: symlink") {
            return Ok(None);
        }
        Ok(text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("Fast link dest: ")
                .map(|d| d.trim_matches('"').to_string())
        }))
    }

    /// Type, mtime and link target of a path in the root file system; None when it is
    /// missing.
    pub fn root_inode(&self, path: &str) -> Result<Option<verify::Inode>, ReadError> {
        let (out, errs) = self.debugfs(&format!("stat {path}"))?;
        if errs.contains("not found") {
            return Ok(None);
        }
        let mut inode =
            verify::parse_debugfs_inode(&String::from_utf8_lossy(&out)).ok_or_else(|| {
                self.err(format!(
                    "root file system: debugfs shows no type or mtime for {path}: {}",
                    errs.trim()
                ))
            })?;
        if inode.kind == "symlink" && inode.link.is_none() {
            // A slow link (a target longer than the inode holds): `cat` prints its block.
            let (out, _) = self.debugfs(&format!("cat {path}"))?;
            inode.link = Some(String::from_utf8_lossy(&out).into_owned());
        }
        Ok(Some(inode))
    }
}

impl ImageFile {
    /// What the data file system holds for the checks (verify::data::check_data_fs): its
    /// superblock, its root directory, the marker. Errors when there is no data partition
    /// or debugfs cannot open it (not an ext file system).
    pub fn data_files(&self) -> Result<verify::data::DataFiles, ReadError> {
        let part = self
            .data
            .ok_or_else(|| self.err("no data partition (a second Linux partition)".into()))?;
        let (header, errs) = self.debugfs_on(&part, "stats -h").map_err(|e| {
            self.err(format!(
                "data partition: no readable ext file system: {}",
                e.message
            ))
        })?;
        let header = String::from_utf8_lossy(&header).into_owned();
        if !header.contains("Filesystem magic number") {
            return Err(self.err(format!(
                "data partition: no readable ext file system: {}",
                errs.trim()
            )));
        }
        let stat = |path: &str| -> Result<verify::Stat, ReadError> {
            let (out, errs) = self.debugfs_on(&part, &format!("stat {path}"))?;
            if errs.contains("not found") {
                return Ok(None);
            }
            Ok(verify::parse_debugfs_stat(&String::from_utf8_lossy(&out)))
        };
        let marker_path = format!("/{}", crate::plan::DATA_MARKER);
        let marker = stat(&marker_path)?;
        let marker_text = match marker {
            Some(_) => {
                let (out, _) = self.debugfs_on(&part, &format!("cat {marker_path}"))?;
                Some(String::from_utf8_lossy(&out).into_owned())
            }
            None => None,
        };
        Ok(verify::data::DataFiles {
            header,
            root: stat("/")?,
            marker,
            marker_text,
        })
    }
}

/// The names in an initramfs: uncompressed leading cpio archives (early microcode), then
/// one compressed archive decompressed with the matching host tool.
pub fn initramfs_names(data: &[u8], scratch: &Path) -> Result<Vec<String>, String> {
    let (mut names, end) = verify::cpio_names(data).map_err(|e| e.to_string())?;
    if end < data.len() {
        let rest = &data[end..];
        let tool = verify::compression(rest)
            .ok_or_else(|| format!("unknown compression at byte {end} of the initramfs"))?;
        let tmp = scratch.join("initramfs.tail");
        std::fs::write(&tmp, rest).map_err(|e| format!("{}: {e}", tmp.display()))?;
        let out = Command::new(tool)
            .args(["-dc"])
            .arg(&tmp)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {tool}: {e}"));
        let _ = std::fs::remove_file(&tmp);
        let out = out?;
        if !out.status.success() {
            return Err(format!(
                "{tool} -dc failed on the initramfs: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let (more, _) = verify::cpio_names(&out.stdout).map_err(|e| e.to_string())?;
        names.extend(more);
    }
    Ok(names)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::disk::Layout;
    use crate::verify::data::check_data_fs;

    pub(crate) fn have(tool: &str) -> bool {
        Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    }

    pub(crate) fn ok(cmd: &mut Command) {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A real image file: the builder's layout written by sfdisk, a data file system made
    /// by mke2fs as the builder makes it, read back through debugfs at its offset.
    /// An empty image file in `dir` partitioned by sfdisk with the builder's layout; None
    /// (said on stderr) when the tools the real-file tests need are missing.
    pub(crate) fn partitioned_image(dir: &Path) -> Option<(Layout, PathBuf)> {
        if !(have("sfdisk") && have("mke2fs") && have("debugfs")) {
            eprintln!("skipped: needs sfdisk, mke2fs and debugfs (e2fsprogs, fdisk)");
            return None;
        }
        let l = Layout::new(4 + 64 + 2 * 512 + 32, 64, 32).unwrap();
        let img = dir.join("t.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(l.total_bytes)
            .unwrap();
        let mut sf = Command::new("sfdisk")
            .args(["-q", "--no-reread", "--no-tell-kernel"])
            .arg(&img)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut sf.stdin.take().unwrap(), l.sfdisk_script().as_bytes())
            .unwrap();
        assert!(sf.wait().unwrap().success());
        Some((l, img))
    }

    #[test]
    fn data_partition_read_back_from_a_real_image_file() {
        let d = tempfile::tempdir().unwrap();
        let Some((l, img)) = partitioned_image(d.path()) else {
            return;
        };
        let dir = d.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join(crate::plan::DATA_MARKER),
            crate::plan::DATA_MARKER_TEXT,
        )
        .unwrap();
        let fs = d.path().join("data.ext4");
        std::fs::File::create(&fs)
            .unwrap()
            .set_len(l.data_sectors * 512)
            .unwrap();
        ok(Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-b", "4096", "-L", "pfx-data"])
            .args(["-E", "root_owner=0:0", "-d"])
            .arg(&dir)
            .arg(&fs));
        // As the build does: mke2fs -d leaves the root 0755, the mode is set afterwards.
        ok(Command::new("debugfs")
            .args(["-w", "-R", "set_inode_field / mode 042775"])
            .arg(&fs));
        ok(Command::new("dd")
            .arg(format!("if={}", fs.display()))
            .arg(format!("of={}", img.display()))
            .args(["bs=1M", "conv=notrunc,sparse", "status=none"])
            .arg(format!("seek={}", l.data_start * 512))
            .arg("oflag=seek_bytes"));

        let f = ImageFile::open(&img).unwrap();
        assert_eq!(f.root.index, 2);
        assert_eq!(f.data.map(|p| p.start_sector), Some(l.data_start));
        let files = f.data_files().unwrap();
        assert_eq!(files.root.map(|r| r.0), Some(crate::plan::DATA_ROOT_MODE));
        assert_eq!(
            files.marker_text.as_deref(),
            Some(crate::plan::DATA_MARKER_TEXT)
        );
        // The marker's owner is whoever ran mke2fs -d: only root gets a fully clean check.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let c = check_data_fs(&files).unwrap();
            assert_eq!((c.label.as_str(), c.block_size), ("pfx-data", 4096));
        }

        // Wipe the superblock: the reader says there is no file system there.
        ok(Command::new("dd")
            .args([
                "if=/dev/zero",
                "bs=4096",
                "count=1",
                "conv=notrunc",
                "status=none",
            ])
            .arg(format!("of={}", img.display()))
            .arg(format!("seek={}", l.data_start * 512 / 4096)));
        let e = f.data_files().unwrap_err().to_string();
        assert!(
            e.contains("data partition: no readable ext file system"),
            "{e}"
        );
    }
}
