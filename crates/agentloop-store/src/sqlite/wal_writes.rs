//! A commit written to SQLite's WAL in one `pwrite` instead of two per page.
//!
//! SQLite writes each page of a commit to the WAL as two `pwrite`s, the frame's 24-byte header
//! and then the page, at offsets that straddle the file's 4 KiB pages: a step of a run commits
//! about 11 pages, so 22 system calls, each finding, locking and dirtying the same file pages
//! again. Those were 13% of the server's CPU for runs one after another. This VFS is SQLite's
//! own (`unix`) for every file but the WAL; for the WAL, it keeps writes that follow each
//! other in memory and hands them to the real file in one write when the commit's last page
//! has come (its frame header carries the database's size, which only a commit's does), or
//! before anything else touches the file: a read, a sync, a truncation, its size, a file
//! control, closing it, or 1 MiB of writes in a large transaction.
//!
//! What this keeps: when `COMMIT` returns, every byte of it is in the file, as without this VFS
//! (the test `a_commit_is_in_the_file_when_it_returns` copies the files of an open connection
//! and opens the copy); other connections and processes see the WAL only through the
//! WAL-index, which SQLite updates after the frames are written; a failed write fails the
//! `COMMIT` that made it, which SQLite rolls back. Locks, shared memory and the database file
//! are the `unix` VFS's own, untouched.
//!
//! The only `unsafe` code of the workspace: a VFS is a table of C functions over C structs.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

use rusqlite::ffi;

/// The name connections open the store's database files with.
const NAME: &CStr = c"agentloop-wal";

/// Writes kept in memory past this are handed on before the commit ends (a large transaction
/// whose pages spill before it commits).
const MOST_KEPT: usize = 1 << 20;

/// The most the `unix` VFS writes in one call (it keeps the low 17 bits of a length): a part
/// of whole 4 KiB pages below that.
const LONGEST_WRITE: usize = 0x1f000;

/// A frame's header: page number, then the database's size in pages for a commit, else 0.
const FRAME_HEADER: usize = 24;

/// The VFS this one hands everything to (SQLite's default, `unix`).
static REAL: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(std::ptr::null_mut());

#[cfg(test)]
thread_local! {
    /// Writes this thread handed to WAL files.
    static WAL_WRITES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The VFS to open file databases with; `None` when it could not be registered (no default
/// VFS), and SQLite's default serves.
pub(crate) fn vfs() -> Option<&'static CStr> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            // SAFETY: registration happens once; the struct is leaked and lives as long as
            // the process, as SQLite requires of a registered VFS.
            let registered = unsafe { register() };
            if !registered {
                tracing::warn!("SQLite has no default VFS to wrap; WAL writes are not batched");
            }
            registered
        })
        .then_some(NAME)
}

/// How many writes this thread handed to WAL files so far.
#[cfg(test)]
pub(crate) fn wal_writes() -> u64 {
    WAL_WRITES.with(std::cell::Cell::get)
}

unsafe fn register() -> bool {
    // SAFETY (whole function): `sqlite3_vfs_find` returns a VFS SQLite keeps for the life of
    // the process; ours is a copy of it, leaked.
    unsafe {
        let real = ffi::sqlite3_vfs_find(std::ptr::null());
        if real.is_null() {
            return false;
        }
        REAL.store(real, Ordering::Release);
        let mut ours: ffi::sqlite3_vfs = std::ptr::read(real);
        ours.szOsFile = real_file_offset() + (*real).szOsFile;
        ours.zName = NAME.as_ptr();
        ours.pNext = std::ptr::null_mut();
        ours.xOpen = Some(open);
        let ours = Box::leak(Box::new(ours));
        ffi::sqlite3_vfs_register(ours, 0) == ffi::SQLITE_OK
    }
}

/// A WAL file as SQLite sees it: our methods, then the real file after this struct, in the
/// memory SQLite allocated (`szOsFile`).
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// Writes that follow each other, from `start`, not yet handed on.
    kept: Vec<u8>,
    start: i64,
    /// The last write was a commit's frame header: its page ends the commit.
    commit_header: bool,
}

/// Where the real file starts in the memory of a [`WalFile`] (8-byte aligned, as SQLite
/// aligns the whole).
const fn real_file_offset() -> c_int {
    let size = std::mem::size_of::<WalFile>();
    (size.div_ceil(8) * 8) as c_int
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY (whole function): SQLite gives `file` as `szOsFile` bytes, 8-byte aligned; the
    // real VFS was stored before ours was registered.
    unsafe {
        let real_vfs = REAL.load(Ordering::Acquire);
        let Some(real_open) = (*real_vfs).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            // Everything else is the real VFS's file, where SQLite put it.
            return real_open(real_vfs, name, file, flags, out_flags);
        }
        let real = file.cast::<u8>().add(real_file_offset() as usize).cast();
        std::ptr::write(
            file.cast::<WalFile>(),
            WalFile {
                base: ffi::sqlite3_file {
                    pMethods: std::ptr::null(),
                },
                real,
                kept: Vec::new(),
                start: 0,
                commit_header: false,
            },
        );
        let rc = real_open(real_vfs, name, real, flags, out_flags);
        if (*real).pMethods.is_null() {
            // Not opened: SQLite will not close it, so its memory is let go here.
            std::ptr::drop_in_place(file.cast::<WalFile>());
        } else {
            (*file).pMethods = &WAL_METHODS;
        }
        rc
    }
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// Our part of a file SQLite opened through [`open`] with the WAL flag.
unsafe fn wal<'a>(file: *mut ffi::sqlite3_file) -> &'a mut WalFile {
    // SAFETY: only our methods call this, on files [`open`] initialised.
    unsafe { &mut *file.cast::<WalFile>() }
}

/// Calls a method of the real file: `forward!(file, xName, answer if it lacks it, args…)`.
macro_rules! forward {
    ($file:expr, $method:ident, $missing:expr $(, $arg:expr)*) => {{
        let real = wal($file).real;
        match (*(*real).pMethods).$method {
            Some(method) => method(real $(, $arg)*),
            None => $missing,
        }
    }};
}

/// Hands what is kept to the real file, in one write unless it is longer than
/// [`LONGEST_WRITE`].
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: `file` is one of ours; no reference to it is held across the real write.
    unsafe {
        let this = wal(file);
        if this.kept.is_empty() {
            return ffi::SQLITE_OK;
        }
        let mut kept = std::mem::take(&mut this.kept);
        let (real, start) = (this.real, this.start);
        this.commit_header = false;
        let rc = write_parts(real, &kept, start);
        kept.clear();
        if kept.capacity() <= MOST_KEPT {
            wal(file).kept = kept;
        }
        rc
    }
}

/// Writes `bytes` at `start` of the real file, in parts the `unix` VFS takes.
unsafe fn write_parts(real: *mut ffi::sqlite3_file, bytes: &[u8], start: i64) -> c_int {
    // SAFETY: `real` is an open file of the real VFS; each part outlives its call.
    unsafe {
        let Some(write) = (*(*real).pMethods).xWrite else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let mut offset = start;
        for part in bytes.chunks(LONGEST_WRITE) {
            #[cfg(test)]
            WAL_WRITES.with(|writes| writes.set(writes.get() + 1));
            // Both fit: a part is at most `LONGEST_WRITE` long.
            let length = part.len() as c_int;
            let rc = write(real, part.as_ptr().cast(), length, offset);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            offset += i64::from(length);
        }
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite passes `amount` readable bytes at `data`.
    unsafe {
        let Ok(length) = usize::try_from(amount) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), length);
        let this = wal(file);
        // The write after a commit's frame header is its page, the commit's last write.
        let ends_commit = this.commit_header;
        let follows = i64::try_from(this.kept.len())
            .ok()
            .and_then(|kept| this.start.checked_add(kept))
            == Some(offset);
        if !this.kept.is_empty() && !follows {
            let rc = flush(file);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        let this = wal(file);
        if this.kept.is_empty() {
            this.start = offset;
        }
        this.kept.extend_from_slice(bytes);
        if ends_commit {
            return flush(file);
        }
        this.commit_header = length == FRAME_HEADER && bytes[4..8] != [0; 4];
        if this.kept.len() >= MOST_KEPT {
            return flush(file);
        }
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file once; nothing of ours is used after.
    unsafe {
        let flushed = flush(file);
        let closed = forward!(file, xClose, ffi::SQLITE_OK);
        std::ptr::drop_in_place(file.cast::<WalFile>());
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    }
}

/// Methods that see the file as it is: what is kept is written first.
macro_rules! after_flush {
    ($name:ident, $method:ident, $missing:expr, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: `file` is one of ours; the arguments are SQLite's, handed on.
            unsafe {
                let rc = flush(file);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                forward!(file, $method, $missing $(, $arg)*)
            }
        }
    };
}

/// Methods that do not touch the file's bytes.
macro_rules! handed_on {
    ($name:ident, $method:ident, $missing:expr, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: `file` is one of ours; the arguments are SQLite's, handed on.
            unsafe { forward!(file, $method, $missing $(, $arg)*) }
        }
    };
}

after_flush!(read, xRead, ffi::SQLITE_IOERR_READ, (data: *mut c_void, amount: c_int, offset: i64));
after_flush!(truncate, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, (size: i64));
after_flush!(sync, xSync, ffi::SQLITE_IOERR_FSYNC, (flags: c_int));
after_flush!(file_size, xFileSize, ffi::SQLITE_IOERR_FSTAT, (size: *mut i64));
after_flush!(file_control, xFileControl, ffi::SQLITE_NOTFOUND, (op: c_int, arg: *mut c_void));
after_flush!(fetch, xFetch, ffi::SQLITE_OK, (offset: i64, amount: c_int, out: *mut *mut c_void));
after_flush!(unfetch, xUnfetch, ffi::SQLITE_OK, (offset: i64, page: *mut c_void));
handed_on!(lock, xLock, ffi::SQLITE_IOERR_LOCK, (level: c_int));
handed_on!(unlock, xUnlock, ffi::SQLITE_IOERR_UNLOCK, (level: c_int));
handed_on!(check_reserved_lock, xCheckReservedLock, ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, (out: *mut c_int));
handed_on!(sector_size, xSectorSize, 4096, ());
handed_on!(device_characteristics, xDeviceCharacteristics, 0, ());
handed_on!(shm_map, xShmMap, ffi::SQLITE_IOERR_SHMMAP, (region: c_int, size: c_int, extend: c_int, out: *mut *mut c_void));
handed_on!(shm_lock, xShmLock, ffi::SQLITE_IOERR_SHMLOCK, (offset: c_int, count: c_int, flags: c_int));
handed_on!(shm_unmap, xShmUnmap, ffi::SQLITE_OK, (delete: c_int));

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: `file` is one of ours.
    unsafe {
        let real = wal(file).real;
        if let Some(method) = (*(*real).pMethods).xShmBarrier {
            method(real);
        }
    }
}

#[cfg(test)]
mod tests;
