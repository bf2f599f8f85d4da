//! A file mapped into memory for appending: the commit log's segments, as
//! Cassandra's (`MemoryMappedSegment`). An append is then a copy into the
//! page cache, which outlives the process: no system call, nothing to wait
//! for, and a killed process still loses nothing appended.
//!
//! With `prefetch.rs` (a cache hint) and `background.rs` (a thread's
//! priority), the only `unsafe` code of the storage engine, kept behind
//! this safe interface. It rests on two rules the commit log keeps:
//! - the whole mapped range of the file is allocated on disk
//!   (`posix_fallocate`) before it is mapped, so a write never meets a page
//!   without blocks behind it (SIGBUS, on a full disk): a full disk fails
//!   the segment's creation instead, with a clear error;
//! - the file is never made shorter while mapped (the commit log cuts a
//!   segment's unused tail only after unmapping it, and holds no [`Pages`]
//!   handle of it then: they keep the mapping too).
//!
//! The mapping is only written, never read, here: what another process
//! might write to the file cannot break an invariant of this module.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// `len` bytes of a file, mapped shared and writable: the file's one
/// writer. [`Pages`] handles may share the mapping (and keep it mapped) to
/// fault its pages in, which changes no byte.
pub struct MappedFile {
    map: Arc<Mapping>,
}

/// The mapping itself, unmapped when its last holder goes.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is memory owned by the `MappedFile` alone, whose
// writes take `&mut self`; through `&Mapping` (shared with `Pages`) only the
// length is read and pages are faulted in, no byte read or written.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// A handle on a [`MappedFile`]'s pages that faults them in ahead of its
/// writer (another thread's work), and keeps the mapping alive meanwhile.
pub struct Pages(Arc<Mapping>);

impl MappedFile {
    /// Allocates the first `len` bytes of `file` on disk (a full disk fails
    /// here, not at a later write) and maps them. `file` must be open for
    /// reading and writing.
    pub fn allocate_and_map(file: &File, len: usize) -> std::io::Result<MappedFile> {
        let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
        if len == 0 {
            return Err(invalid("cannot map an empty range"));
        }
        let off = libc::off_t::try_from(len).map_err(|_| invalid("mapping too large"))?;
        let fd = file.as_raw_fd();
        // SAFETY: a system call on an open descriptor, with no memory passed.
        let r = unsafe { libc::posix_fallocate(fd, 0, off) };
        if r != 0 {
            return Err(std::io::Error::from_raw_os_error(r));
        }
        // SAFETY: a new mapping chosen by the kernel (no address given), of
        // a range the file now holds; nothing else refers to that memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(MappedFile {
            map: Arc::new(Mapping {
                ptr: ptr.cast::<u8>(),
                len,
            }),
        })
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.map.len
    }

    /// A handle that faults this mapping's pages in from another thread.
    pub fn pages(&self) -> Pages {
        Pages(self.map.clone())
    }

    /// Copies `data` to `offset` of the file. A range past the mapping is a
    /// bug of the caller: it panics rather than write out of bounds.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        let end = offset.checked_add(data.len());
        assert!(
            end.is_some_and(|e| e <= self.map.len),
            "write of {} bytes at {offset} past a mapping of {}",
            data.len(),
            self.map.len
        );
        // SAFETY: `offset..offset + data.len()` lies within the live mapping
        // (checked above), which `data`, a Rust slice, cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.ptr.add(offset), data.len());
        }
    }
}

impl Pages {
    /// The pages of `offset..offset + len` (cut to the mapping) faulted in
    /// writable now, as a write would (`MADV_POPULATE_WRITE`), so that the
    /// writes that follow take no page fault: the commit log's syncer does
    /// this ahead of the appends, which run on the event loops. Their bytes
    /// do not change. False when the kernel cannot (before Linux 5.14).
    pub fn populate(&self, offset: usize, len: usize) -> bool {
        const PAGE: usize = 4096;
        let start = (offset / PAGE) * PAGE;
        let end = offset.saturating_add(len).min(self.0.len);
        if start >= end {
            return true;
        }
        // SAFETY: a range within the mapping, alive while this handle is
        // (it starts on a page); the call faults its pages in and changes
        // no byte of them, so the writer's copies are not affected.
        let r = unsafe {
            libc::madvise(
                self.0.ptr.add(start).cast::<libc::c_void>(),
                end - start,
                libc::MADV_POPULATE_WRITE,
            )
        };
        r == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `allocate_and_map`, unmapped once.
        // Written pages stay in the page cache, and reach the disk as any.
        unsafe {
            libc::munmap(self.ptr.cast::<libc::c_void>(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new file open for reading and writing, in a directory of its own
    /// (kept while the test runs).
    fn new_file() -> (tempfile::TempDir, std::path::PathBuf, File) {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        (dir, path, file)
    }

    #[test]
    fn writes_reach_the_file_without_a_system_call_of_ours() {
        let (_dir, path, file) = new_file();
        let mut m = MappedFile::allocate_and_map(&file, 8192).expect("map");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 8192);
        m.write(4094, b"abcd");
        let data = std::fs::read(&path).expect("read");
        assert_eq!(&data[4094..4098], b"abcd");
        assert!(data[..4094].iter().all(|b| *b == 0));
        drop(m);
        assert_eq!(&std::fs::read(&path).expect("read")[4094..4098], b"abcd");
    }

    #[test]
    fn populating_faults_pages_in_and_changes_no_byte() {
        let (_dir, path, file) = new_file();
        let mut m = MappedFile::allocate_and_map(&file, 64 * 1024).expect("map");
        m.write(5000, b"kept");
        let pages = m.pages();
        assert!(
            pages.populate(100, 40 * 1024),
            "Linux 5.14 or later populates"
        );
        // past the end is cut to the mapping
        assert!(
            std::thread::spawn(move || pages.populate(60 * 1024, 1 << 20))
                .join()
                .expect("thread")
        );
        m.write(9000, b"after");
        let data = std::fs::read(&path).expect("read");
        assert_eq!(&data[5000..5004], b"kept");
        assert_eq!(&data[9000..9005], b"after");
        let changed = data
            .iter()
            .enumerate()
            .filter(|(i, b)| **b != 0 && !(5000..5004).contains(i) && !(9000..9005).contains(i))
            .count();
        assert_eq!(changed, 0);
    }

    #[test]
    #[should_panic(expected = "past a mapping")]
    fn a_write_past_the_end_panics_instead_of_corrupting_memory() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(dir.path().join("f"))
            .expect("open");
        let mut m = MappedFile::allocate_and_map(&file, 4096).expect("map");
        m.write(4094, b"abcd");
    }
}
