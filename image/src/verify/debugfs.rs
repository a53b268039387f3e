//! What debugfs prints, parsed: directory listings, a file's mode and owner, an inode's type, times and link.

use serde::Serialize;

/// Parses `debugfs -R 'ls -p DIR'` output into names (without . and ..).
pub fn parse_debugfs_ls(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('/').collect();
            // "/ino/mode/uid/gid/name/size/"
            (f.len() >= 7).then(|| f[5].to_string())
        })
        .filter(|n| n != "." && n != ".." && !n.is_empty())
        .collect()
}

/// `(mode, uid)` from `debugfs -R 'stat PATH'` output (mode without the file type bits).
pub fn parse_debugfs_stat(text: &str) -> Option<(u32, u32)> {
    let after = |key: &str| {
        let w: Vec<&str> = text.split_whitespace().collect();
        w.iter()
            .position(|x| *x == key)
            .and_then(|i| w.get(i + 1).copied())
    };
    let mode = u32::from_str_radix(after("Mode:")?, 8).ok()?;
    let uid = after("User:")?.parse().ok()?;
    Some((mode & 0o7777, uid))
}

/// A modification time as ext4 keeps it: seconds and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Mtime {
    pub sec: i64,
    pub nsec: u32,
}

/// A file of the root as `debugfs -R 'stat PATH'` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// debugfs's word for the type: `regular`, `directory`, `symlink`, ...
    pub kind: String,
    pub mtime: Mtime,
    /// A symlink's target: debugfs prints a fast link's; the I/O side reads a slow one's.
    pub link: Option<String>,
}

/// Type, mtime and fast link target from `debugfs -R 'stat PATH'` output. The mtime is
/// `0xSECONDS:0xEXTRA` on large inodes (EXTRA: nanoseconds << 2 | the seconds' epoch bits
/// 32-33), `0xSECONDS` alone on 128-byte ones.
pub fn parse_debugfs_inode(text: &str) -> Option<Inode> {
    let kind = text
        .split_once("Type: ")
        .and_then(|(_, rest)| rest.split("Mode:").next())
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())?;
    let value = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("mtime:"))?
        .split_whitespace()
        .next()?;
    let (lo, extra) = match value.split_once(':') {
        Some((lo, extra)) => (lo, Some(extra)),
        None => (value, None),
    };
    let hex = |h: &str| u32::from_str_radix(h.trim_start_matches("0x"), 16).ok();
    let lo = hex(lo)?;
    let extra = match extra {
        Some(e) => hex(e)?,
        None => 0,
    };
    let mtime = Mtime {
        sec: i64::from(lo as i32) + (i64::from(extra & 3) << 32),
        nsec: extra >> 2,
    };
    let link = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Fast link dest: ")
            .map(|d| d.trim_matches('"').to_string())
    });
    Some(Inode { kind, mtime, link })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debugfs_ls() {
        let t = "/12/040755/0/0/.//\n/2/040755/0/0/..//\n/13/120777/0/0/pfx-player.service/10/\n";
        assert_eq!(parse_debugfs_ls(t), vec!["pfx-player.service"]);
    }

    #[test]
    fn debugfs_inode() {
        let stat = "Inode: 19   Type: directory    Mode:  0755   Flags: 0x80000\n\
                    User:     0   Group:     0   Project:     0   Size: 1024\n \
                    ctime: 0x6b0f4790:00000000 -- Tue Dec  1 22:17:52 2026\n \
                    mtime: 0x6b0d4920:075bcd15 -- Mon Nov 30 10:00:00 2026\n";
        let i = parse_debugfs_inode(stat).unwrap();
        assert_eq!(i.kind, "directory");
        // 0x075bcd15 = 123456789: nanoseconds 30864197, epoch bits 1 (after 2038).
        assert_eq!(
            i.mtime,
            Mtime {
                sec: 0x6b0d4920 + (1 << 32),
                nsec: 0x075bcd15 >> 2
            }
        );
        assert_eq!(i.link, None);
        let link = "Inode: 18   Type: symlink    Mode:  0777   Flags: 0x0\n \
                    mtime: 0x6b0f4790 -- Tue Dec  1 22:17:52 2026\n\
                    Fast link dest: \"/dev/null\"\n";
        let i = parse_debugfs_inode(link).unwrap();
        assert_eq!(
            (i.kind.as_str(), i.link.as_deref()),
            ("symlink", Some("/dev/null"))
        );
        assert_eq!(
            i.mtime,
            Mtime {
                sec: 0x6b0f4790,
                nsec: 0
            }
        );
        assert_eq!(
            parse_debugfs_inode("/x: File not found by ext2_lookup"),
            None
        );
    }

    #[test]
    fn debugfs_stat_mode_and_owner() {
        let t = "Inode: 1234   Type: regular    Mode:  0440   Flags: 0x80000\nGeneration: 0    Version: 0x00000000:00000000\nUser:     0   Group:     0   Project:     0   Size: 98\n";
        assert_eq!(parse_debugfs_stat(t), Some((0o440, 0)));
    }
}
