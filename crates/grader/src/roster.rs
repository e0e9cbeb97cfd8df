//! Who is in the class, and what each of them handed in.
//!
//! A roster (`--roster FILE`, CSV with a header) lists the students: an `id` column (the name of
//! the student's folder in the class folder), optionally `name` and `email` (other columns are
//! kept for exports, in order). Every rostered student gets a row: graded, `no submission` (no
//! folder, or an empty one), or `not a workbook` (a folder holding neither a workbook nor, one
//! level down, a single folder that is one: the usual layout of an archive unpacked as it came
//! from "Download ZIP" or an LMS). Folders the roster does not name are listed, never graded in
//! silence. Without a roster, every folder of the class folder is a student.
//!
//! ```
//! let roster = grader::roster::Roster::parse("id,name,email\nalice,Alice A.,a@x.org\nbob,,\n").unwrap();
//! assert_eq!(roster.students.len(), 2);
//! assert_eq!(roster.students[0].name.as_deref(), Some("Alice A."));
//! assert_eq!(roster.students[1].email, None);
//! ```

use crate::error::{GradeError, Result};
use crate::submission::safe_name;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A student of the roster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Student {
    /// Their id: the name of their folder.
    pub id: String,
    /// Their name, if the roster has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Their e-mail address, if the roster has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Every other column of the roster, by header, in order (an LMS's identity columns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<(String, String)>,
}

/// A parsed roster.
#[derive(Clone, Debug, Default)]
pub struct Roster {
    /// In the roster's order.
    pub students: Vec<Student>,
}

impl Roster {
    /// Reads a roster file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = crate::submission::read_regular(
            path.parent().unwrap_or(Path::new(".")),
            &path.file_name().unwrap_or_default().to_string_lossy(),
        )
        .map_err(|why| GradeError::Roster(format!("{}: {why}", path.display())))?;
        Self::parse(&String::from_utf8_lossy(&text))
            .map_err(|e| GradeError::Roster(format!("{}: {e}", path.display())))
    }

    /// Parses CSV text with a header that has an `id` column.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .from_reader(text.as_bytes());
        let header: Vec<String> = reader
            .headers()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|h| h.to_string())
            .collect();
        let column = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
        let id = column("id").ok_or_else(|| {
            format!(
                "no `id` column (the header is {}): the roster needs a header with `id` (the student's folder name), optionally `name` and `email`",
                header.join(",")
            )
        })?;
        let (name, email) = (column("name"), column("email"));
        let mut students = Vec::new();
        let mut seen = BTreeSet::new();
        for (line, record) in reader.records().enumerate() {
            let record = record.map_err(|e| e.to_string())?;
            let get = |i: Option<usize>| {
                i.and_then(|i| record.get(i))
                    .map(str::to_string)
                    .filter(|v| !v.is_empty())
            };
            let Some(student_id) = get(Some(id)) else {
                continue;
            };
            if !seen.insert(student_id.clone()) {
                return Err(format!(
                    "line {}: the id {student_id} appears twice",
                    line + 2
                ));
            }
            let extra = header
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != Some(id) && Some(*i) != name && Some(*i) != email)
                .map(|(i, h)| (h.clone(), record.get(i).unwrap_or_default().to_string()))
                .collect();
            students.push(Student {
                id: student_id,
                name: get(name),
                email: get(email),
                extra,
            });
        }
        if students.is_empty() {
            return Err("no students (every row needs an id)".into());
        }
        Ok(Self { students })
    }
}

/// What was found for a student.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    /// A workbook, here (maybe one level below the student's folder).
    Workbook(PathBuf),
    /// No folder, or an empty one.
    NoSubmission,
    /// A folder without a workbook in it (or one level down).
    NotAWorkbook,
}

/// A row to grade: a student (rostered or not) and what was found.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The student.
    pub student: Student,
    /// Their name in reports (their id, made safe for file names; unique).
    pub name: String,
    /// What was found.
    pub found: Found,
    /// Whether the roster names them (false without a roster).
    pub rostered: bool,
}

/// Whether `dir` is a copy of the workbook.
pub fn is_workbook(dir: &Path) -> bool {
    dir.join("exercises").is_dir() && dir.join("Cargo.toml").is_file()
}

/// The workbook in `dir`: `dir` itself, or the only sub-folder (not a link) of `dir` that is
/// one. Hidden entries (`__MACOSX`, `.DS_Store`) are not counted.
pub fn locate(dir: &Path) -> Found {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Found::NoSubmission;
    };
    if !meta.is_dir() {
        return Found::NotAWorkbook;
    }
    if is_workbook(dir) {
        return Found::Workbook(dir.to_path_buf());
    }
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    let visible: Vec<_> = entries
        .iter()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            !n.starts_with('.') && n != "__MACOSX"
        })
        .collect();
    if visible.is_empty() {
        return Found::NoSubmission;
    }
    let inner: Vec<PathBuf> = visible
        .iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| is_workbook(p))
        .collect();
    match inner.as_slice() {
        [one] => Found::Workbook(one.clone()),
        _ => Found::NotAWorkbook,
    }
}

/// The rows of a class folder: with a roster, one per rostered student (and `unknown`, the
/// folders it does not name); without, one per sub-folder. Links are never followed.
pub fn entries(class_dir: &Path, roster: Option<&Roster>) -> Result<(Vec<Entry>, Vec<String>)> {
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(class_dir).map_err(|e| GradeError::io(class_dir, e))? {
        let entry = entry.map_err(|e| GradeError::io(class_dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_ok_and(|t| t.is_dir()) && !name.starts_with('.') {
            folders.push(name);
        }
    }
    folders.sort();
    // Two students whose ids make the same name would share a report, a feedback file and an
    // archive (renaming one `-2` handed feedback back to the wrong student): refused, naming both.
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    let mut unique = |raw: &str| -> Result<String> {
        let name = safe_name(raw);
        if let Some(first) = taken.insert(name.clone(), raw.to_string()) {
            return Err(GradeError::Roster(format!(
                "the students {} and {} would both be graded as '{name}' (names are made of letters, digits, '.', '_' and '-'): rename one of their folders (and its roster id) so that each student has a name of their own",
                crate::escape::json(&first),
                crate::escape::json(raw)
            )));
        }
        Ok(name)
    };
    let mut rows = Vec::new();
    let mut unknown = Vec::new();
    match roster {
        Some(roster) => {
            for student in &roster.students {
                let found = if folders.contains(&student.id) {
                    locate(&class_dir.join(&student.id))
                } else {
                    Found::NoSubmission
                };
                rows.push(Entry {
                    name: unique(&student.id)?,
                    student: student.clone(),
                    found,
                    rostered: true,
                });
            }
            let known: BTreeSet<&String> = roster.students.iter().map(|s| &s.id).collect();
            unknown = folders.into_iter().filter(|f| !known.contains(f)).collect();
        }
        None => {
            for folder in folders {
                rows.push(Entry {
                    name: unique(&folder)?,
                    found: locate(&class_dir.join(&folder)),
                    student: Student {
                        id: folder,
                        name: None,
                        email: None,
                        extra: Vec::new(),
                    },
                    rostered: false,
                });
            }
        }
    }
    Ok((rows, unknown))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workbook(dir: &Path) {
        std::fs::create_dir_all(dir.join("exercises")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "").unwrap();
    }

    #[test]
    fn archives_unpacked_one_level_deep_are_found() {
        let class = tempfile::tempdir().unwrap();
        let c = class.path();
        workbook(&c.join("alice"));
        workbook(&c.join("bob/workbook-main"));
        std::fs::create_dir_all(c.join("bob/__MACOSX")).unwrap();
        std::fs::create_dir_all(c.join("carol")).unwrap();
        std::fs::create_dir_all(c.join("dave/notes")).unwrap();
        std::fs::write(c.join("erin"), "a file").unwrap();
        let roster = Roster::parse("id\nalice\nbob\ncarol\ndave\nfrank\n").unwrap();
        let (rows, unknown) = entries(c, Some(&roster)).unwrap();
        let found: Vec<_> = rows.iter().map(|r| (r.name.as_str(), &r.found)).collect();
        assert_eq!(found[0], ("alice", &Found::Workbook(c.join("alice"))));
        assert_eq!(
            found[1],
            ("bob", &Found::Workbook(c.join("bob/workbook-main")))
        );
        assert_eq!(found[2], ("carol", &Found::NoSubmission));
        assert_eq!(found[3], ("dave", &Found::NotAWorkbook));
        assert_eq!(found[4], ("frank", &Found::NoSubmission));
        assert!(unknown.is_empty(), "{unknown:?}");
        let (rows, _) = entries(c, None).unwrap();
        assert_eq!(rows.len(), 4, "every folder is a student without a roster");
    }

    #[test]
    fn ids_that_make_the_same_name_are_refused_with_both() {
        let class = tempfile::tempdir().unwrap();
        let c = class.path();
        workbook(&c.join("bob smith"));
        workbook(&c.join("bob_smith"));
        workbook(&c.join("carol"));
        let err = entries(c, None).unwrap_err().to_string();
        assert!(
            err.contains("\"bob smith\"") && err.contains("\"bob_smith\""),
            "{err}"
        );
        let roster = Roster::parse("id\nbob smith\nbob_smith\n").unwrap();
        let err = entries(c, Some(&roster)).unwrap_err().to_string();
        assert!(err.contains("'bob_smith'"), "{err}");
        std::fs::remove_dir(c.join("bob smith/exercises")).unwrap();
        std::fs::remove_file(c.join("bob smith/Cargo.toml")).unwrap();
        std::fs::remove_dir(c.join("bob smith")).unwrap();
        let (rows, _) = entries(c, None).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["bob_smith", "carol"]);
    }

    #[test]
    fn rosters_need_ids_and_no_duplicates() {
        assert!(Roster::parse("name\nx\n")
            .unwrap_err()
            .contains("no `id` column"));
        assert!(Roster::parse("id\na\na\n").unwrap_err().contains("twice"));
        let r = Roster::parse("SIS ID,id,Email\n7,a,a@x\n").unwrap();
        assert_eq!(r.students[0].email.as_deref(), Some("a@x"));
        assert_eq!(
            r.students[0].extra,
            vec![("SIS ID".to_string(), "7".to_string())]
        );
    }
}
