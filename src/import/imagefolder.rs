//! [`ImageFolderSource`]: a folder per class, `root/<class>/<file>`, one
//! row per image file (torchvision's `ImageFolder` layout).
//!
//! The classes are the subdirectories of the root, sorted by name; a file's
//! label is its class's index among them. Each class is walked whole (its
//! subdirectories too), in sorted order. Files whose extension (any case)
//! is one of [`ImageFolderOptions::extensions`] are rows, with columns
//! `image` (binary: the file's bytes, left encoded), `label` (int64) and,
//! if asked, `path` (utf8: the path under the root); other files, and files
//! directly under the root, are passed over and counted
//! ([`ImageFolderSource::skipped`]). The class names are the source's to
//! give ([`ImageFolderSource::classes_json`]): the front end that runs the
//! import writes them beside the table as `classes.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::format::{CLASSES_FILE, CLASSES_TMP_FILE};
use crate::io::{FileKind, OpenMode, SyncKind, Vfs, write_all_at};

use super::error::{ImportError, Position};
use super::input::{self, Fingerprint, InputFile, check_batch_rows};
use super::source::Source;

/// The image extensions read unless told otherwise.
pub const IMAGE_EXTENSIONS: [&str; 8] = ["jpg", "jpeg", "png", "webp", "bmp", "gif", "tiff", "tif"];

/// The largest image file read, in bytes (a batch's offsets stay 32-bit).
pub const IMAGE_BYTES_MAX: u64 = 1 << 30;

/// The bytes of images a batch holds at most, unless one image alone is larger.
pub const IMAGE_BATCH_BYTES_MAX: u64 = 64 << 20;

/// How deep a class's subdirectories are walked (a symlink loop ends here).
const IMAGE_FOLDER_DEPTH_MAX: usize = 32;

/// How an [`ImageFolderSource`] reads.
#[derive(Clone, Debug)]
pub struct ImageFolderOptions {
    /// The extensions of the files that are images, lowercase, no dot.
    pub extensions: Vec<String>,
    /// Rows in a batch at most.
    pub batch_rows: usize,
    /// A column `path` with each image's path under the root.
    pub path_column: bool,
}

impl Default for ImageFolderOptions {
    fn default() -> Self {
        ImageFolderOptions {
            extensions: IMAGE_EXTENSIONS.iter().map(|e| e.to_string()).collect(),
            batch_rows: 256,
            path_column: false,
        }
    }
}

/// One image as listed: its class's index, path and length. The file is
/// opened again to read it (a million images are not a million open files).
#[derive(Debug)]
struct Image {
    label: u32,
    path: PathBuf,
    len: u64,
}

/// A folder of class folders of images (see the module's documentation).
pub struct ImageFolderSource {
    vfs: Arc<dyn Vfs>,
    root: PathBuf,
    classes: Vec<String>,
    images: Vec<Image>,
    skipped: u64,
    options: ImageFolderOptions,
    schema: SchemaRef,
    fingerprint: String,
    /// The next image to read (an index into `images`).
    next: usize,
    bytes_read: u64,
}

impl std::fmt::Debug for ImageFolderSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageFolderSource").field("root", &self.root).field("images", &self.images.len()).finish()
    }
}

impl ImageFolderSource {
    /// Lists the images under `root` (one subdirectory per class).
    pub fn open(root: &Path, options: ImageFolderOptions) -> Result<ImageFolderSource, ImportError> {
        ImageFolderSource::open_in(Arc::new(crate::io::real::RealFs), root, options)
    }

    /// [`ImageFolderSource::open`] on any filesystem implementation. Each
    /// image is opened once here for its length and modification time
    /// (its tail is read only where the filesystem keeps no time).
    pub fn open_in(
        vfs: Arc<dyn Vfs>,
        root: &Path,
        options: ImageFolderOptions,
    ) -> Result<ImageFolderSource, ImportError> {
        check_batch_rows(options.batch_rows)?;
        if input::kind(&*vfs, root)? != Some(FileKind::Dir) {
            return Err(ImportError::InvalidArgument(format!(
                "{}: not a directory; an image folder is root/<class>/<image>",
                root.display()
            )));
        }
        let (mut classes, mut images, mut skipped) = (Vec::new(), Vec::new(), 0);
        let mut print = Fingerprint::new("imagefolder");
        print.text(&root.to_string_lossy());
        for name in input::list_sorted(&*vfs, root)? {
            let path = root.join(&name);
            if input::kind(&*vfs, &path)? != Some(FileKind::Dir) {
                skipped += 1;
                continue;
            }
            let label = u32::try_from(classes.len())
                .map_err(|_| ImportError::InvalidArgument(format!("{}: more than 2^32 classes", root.display())))?;
            print.text(&name);
            classes.push(name);
            let mut found = |file: InputFile| {
                print.file(&file)?;
                images.push(Image { label, path: file.path, len: file.len });
                Ok(())
            };
            walk(&*vfs, &path, 0, &options.extensions, &mut found, &mut skipped)?;
        }
        let mut fields =
            vec![Field::new("image", DataType::Binary, false), Field::new("label", DataType::Int64, false)];
        if options.path_column {
            fields.push(Field::new("path", DataType::Utf8, false));
        }
        print.text(&options.extensions.join(","));
        print.text(if options.path_column { "path" } else { "no path" });
        let fingerprint = print.finish();
        let schema = Arc::new(Schema::new(fields));
        Ok(ImageFolderSource {
            vfs,
            root: root.to_path_buf(),
            classes,
            images,
            skipped,
            options,
            schema,
            fingerprint,
            next: 0,
            bytes_read: 0,
        })
    }

    /// The class names, sorted: a label is an index into them.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The class names as the JSON array that goes beside the table as
    /// `classes.json` (`["cat","dog"]`: label 0 is `cat`).
    pub fn classes_json(&self) -> String {
        serde_json::Value::from(self.classes.clone()).to_string()
    }

    /// Files passed over: not an image extension, or not in a class folder.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The image's path under the root, `/`-separated.
    fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
    }
}

/// Lists the images under `dir` in sorted order, `found` each, counting the
/// other files in `skipped`.
fn walk(
    vfs: &dyn Vfs,
    dir: &Path,
    depth: usize,
    extensions: &[String],
    found: &mut dyn FnMut(InputFile) -> Result<(), ImportError>,
    skipped: &mut u64,
) -> Result<(), ImportError> {
    if depth > IMAGE_FOLDER_DEPTH_MAX {
        return Err(ImportError::BadInput {
            path: dir.to_path_buf(),
            at: Position::File,
            reason: format!("more than {IMAGE_FOLDER_DEPTH_MAX} directories deep (a symlink loop?)"),
        });
    }
    for name in input::list_sorted(vfs, dir)? {
        let path = dir.join(&name);
        match input::kind(vfs, &path)? {
            Some(FileKind::Dir) => walk(vfs, &path, depth + 1, extensions, found, skipped)?,
            Some(FileKind::File) => {
                let ext = Path::new(&name).extension().map(|e| e.to_string_lossy().to_lowercase());
                if ext.is_some_and(|e| extensions.contains(&e)) {
                    found(InputFile::open(vfs, &path)?)?;
                } else {
                    *skipped += 1;
                }
            }
            _ => *skipped += 1,
        }
    }
    Ok(())
}

/// Writes an image folder's class names ([`ImageFolderSource::classes_json`])
/// beside the table at `dest` as `classes.json`, after the import's last
/// commit (outside the commit point, so a rerun writes it again): a
/// temporary file, synced, renamed over the name, the directory synced.
/// The front ends (the CLI, Python) call this.
pub fn write_classes(dest: &Path, json: &str) -> Result<(), ImportError> {
    write_classes_in(&crate::io::real::RealFs, dest, json)
}

/// [`write_classes`] on any filesystem implementation.
fn write_classes_in(vfs: &dyn Vfs, dest: &Path, json: &str) -> Result<(), ImportError> {
    let (path, tmp) = (dest.join(CLASSES_FILE), dest.join(CLASSES_TMP_FILE));
    let io = |op: &'static str| move |source| ImportError::Io { path: dest.join(CLASSES_FILE), op, source };
    let file = vfs.open(&tmp, OpenMode::Create).map_err(io("create classes.json.tmp"))?;
    file.set_len(0).map_err(io("truncate classes.json.tmp"))?;
    write_all_at(&*file, json.as_bytes(), 0).map_err(io("write classes.json.tmp"))?;
    file.sync(SyncKind::All).map_err(io("sync classes.json.tmp"))?;
    drop(file);
    vfs.rename(&tmp, &path).map_err(io("rename classes.json.tmp"))?;
    vfs.sync_dir(dest).map_err(io("sync the table directory"))
}

impl Source for ImageFolderSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn rows_hint(&self) -> Option<u64> {
        Some(self.images.len() as u64)
    }

    fn bytes_hint(&self) -> Option<u64> {
        Some(self.images.iter().map(|i| i.len).sum())
    }

    fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        let (mut image, mut label, mut path) = (BinaryBuilder::new(), Int64Builder::new(), StringBuilder::new());
        let (mut rows, mut bytes) = (0, 0);
        while rows < self.options.batch_rows && self.next < self.images.len() {
            let file = &self.images[self.next];
            if rows > 0 && bytes + file.len > IMAGE_BATCH_BYTES_MAX {
                break;
            }
            let data = crate::io::read_file(&*self.vfs, &file.path, IMAGE_BYTES_MAX)
                .map_err(|source| ImportError::Io { path: file.path.clone(), op: "read the image", source })?;
            image.append_value(&data);
            label.append_value(i64::from(file.label));
            if self.options.path_column {
                path.append_value(self.relative(&file.path));
            }
            bytes += data.len() as u64;
            self.bytes_read += data.len() as u64;
            self.next += 1;
            rows += 1;
        }
        if rows == 0 {
            return Ok(None);
        }
        let mut arrays: Vec<ArrayRef> = vec![Arc::new(image.finish()), Arc::new(label.finish())];
        if self.options.path_column {
            arrays.push(Arc::new(path.finish()));
        }
        Ok(Some(RecordBatch::try_new(self.schema.clone(), arrays).expect("columns built to the schema")))
    }

    /// Moves past `rows` images without reading them.
    fn skip(&mut self, rows: u64) -> Result<(), ImportError> {
        let left = (self.images.len() - self.next) as u64;
        if rows > left {
            return Err(ImportError::InvalidArgument(format!(
                "the image folder has {left} images left, fewer than the {rows} the table already holds from it: \
                 it changed since the import began"
            )));
        }
        self.next += rows as usize;
        self.bytes_read += self.images[self.next - rows as usize..self.next].iter().map(|i| i.len).sum::<u64>();
        Ok(())
    }
}
