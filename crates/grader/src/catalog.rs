//! The exercises there are, read from `exercises/<chapter>/<exercise>/exercise.toml`, and how a
//! command-line selection (`01-1`, `01`, `all`) picks some of them.
//!
//! ```
//! use grader::catalog::short_id;
//! assert_eq!(short_id("01-device-management", "2-device-policy"), "01-2");
//! ```

use crate::error::{GradeError, Result};
use crate::lang::Lang;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Which tree is graded: the students' stubs or the reference solutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// `exercises/`: what students edit.
    Exercises,
    /// `solutions/`: the reference solutions, graded by the same tests.
    Solutions,
}

impl Variant {
    /// The top-level folder of this tree.
    pub fn folder(self) -> &'static str {
        match self {
            Variant::Exercises => "exercises",
            Variant::Solutions => "solutions",
        }
    }
}

/// `exercise.toml`: what the grader needs to know about one exercise.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// One line: what the exercise is about.
    pub title: String,
    /// Learning objectives.
    pub objectives: Vec<String>,
    /// The title in Simplified Chinese (`cargo grade --lang zh-CN`); the English one when absent
    /// (the shipped exercises all have it: the repository's tests check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_zh: Option<String>,
    /// The learning objectives in Simplified Chinese, one per English objective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objectives_zh: Option<Vec<String>>,
    /// Files the student edits (relative to the exercise folder); every other file is checked
    /// against the grader's checksums.
    pub edit: Vec<String>,
    /// Time limit per test; 60 s when absent.
    pub time_limit_secs: Option<u64>,
    /// The graded tests, in the order they are shown.
    #[serde(rename = "test")]
    pub tests: Vec<TestSpec>,
}

impl Spec {
    /// The title in `lang`, English where there is no translation.
    pub fn title_in(&self, lang: Lang) -> &str {
        match (lang, &self.title_zh) {
            (Lang::ZhCn, Some(zh)) => zh,
            _ => &self.title,
        }
    }

    /// The objectives in `lang`, English where there is no translation.
    pub fn objectives_in(&self, lang: Lang) -> &[String] {
        match (lang, &self.objectives_zh) {
            (Lang::ZhCn, Some(zh)) => zh,
            _ => &self.objectives,
        }
    }
}

/// One graded test.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    /// The function name in `tests/grade.rs`.
    pub name: String,
    /// Points for passing it.
    pub points: u32,
    /// The program this test builds, instead of a test of `tests/grade.rs`: an example of the
    /// exercise crate (`[[example]]` in its `Cargo.toml`, source in `tests/programs/`), which
    /// includes the student's file. It runs as a scenario of its own, unless `build_only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// With `program`: the test is that it compiles (the compiler's verdict, confined).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub build_only: bool,
    /// With `program`: the test is that the program does *not* compile, refused with an error
    /// whose first line contains this text (an error code, `E0277`, or words of rustc's
    /// message, `lifetime may not live long enough`), pointing into the program. The program
    /// holds a known mistake under `#[cfg(grade_mistake)]` beside the right line under
    /// `#[cfg(not(grade_mistake))]`: compiled as it is it must build (so the refusal is the
    /// mistake's, not a broken crate's), and with `--cfg grade_mistake` it must be refused.
    /// Both verdicts are the compiler's, read by the grader from its JSON diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_fail: Option<String>,
    /// A teacher-only test: its code is in `tests/hidden.rs` (not `tests/grade.rs`), it is left
    /// out of the handout (`--make-handout`), graded only by the judge, and its name and
    /// messages are kept out of students' feedback until released (`--release-hidden`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// Checks of the student's source files that this test also requires (`[[test.source]]`:
    /// no `unsafe impl`, the library's answer not called, no device written in the code). The
    /// judge makes them on the submitted files, outside the student's process; the test's own
    /// code may make them too in a student's own run, but never records them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source: Vec<scenario::source::SourceCheck>,
}

impl TestSpec {
    /// The compiler's verdict is the test (`build_only`, `compile_fail`): no process of the
    /// student's runs, so nothing of theirs is observed or compared.
    pub fn judged_by_the_compiler(&self) -> bool {
        self.build_only || self.compile_fail.is_some()
    }
}

/// One exercise of the catalogue.
#[derive(Clone, Debug)]
pub struct Exercise {
    /// Short id: chapter number and exercise number, `01-2`.
    pub id: String,
    /// `01-device-management/2-device-policy`.
    pub path: String,
    /// `01-device-management`.
    pub chapter: String,
    /// The parsed `exercise.toml`.
    pub spec: Spec,
}

impl Exercise {
    /// The exercise's folder in `variant`'s tree.
    pub fn dir(&self, root: &Path, variant: Variant) -> PathBuf {
        root.join(variant.folder()).join(&self.path)
    }

    /// The folder holding `exercise.toml`, the hints and the graded tests (always `exercises/`).
    pub fn spec_dir(&self, root: &Path) -> PathBuf {
        self.dir(root, Variant::Exercises)
    }

    /// Points for passing every test.
    pub fn max_points(&self) -> u32 {
        self.spec.tests.iter().map(|t| t.points).sum()
    }

    /// Time limit per test.
    pub fn time_limit_secs(&self) -> u64 {
        self.spec.time_limit_secs.unwrap_or(60)
    }

    /// The Cargo package name of this exercise in `variant`'s tree.
    pub fn package(&self, root: &Path, variant: Variant) -> Result<String> {
        #[derive(Deserialize)]
        struct Manifest {
            package: Package,
        }
        #[derive(Deserialize)]
        struct Package {
            name: String,
        }
        let path = self.dir(root, variant).join("Cargo.toml");
        let text = std::fs::read_to_string(&path).map_err(|e| GradeError::io(&path, e))?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| GradeError::BadSpec {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(manifest.package.name)
    }
}

/// `01-device-management` + `2-device-policy` → `01-2`.
pub fn short_id(chapter: &str, exercise: &str) -> String {
    let number = |s: &str| s.split('-').next().unwrap_or(s).to_string();
    format!("{}-{}", number(chapter), number(exercise))
}

/// Every exercise under a repository root.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The repository root (the folder holding `exercises/`).
    pub root: PathBuf,
    /// Exercises in chapter and number order.
    pub exercises: Vec<Exercise>,
}

impl Catalog {
    /// Reads every `exercises/*/*/exercise.toml` under `root`.
    pub fn load(root: &Path) -> Result<Self> {
        let base = root.join("exercises");
        let mut exercises = Vec::new();
        for chapter in sorted_dirs(&base)? {
            for exercise in sorted_dirs(&base.join(&chapter))? {
                let toml_path = base.join(&chapter).join(&exercise).join("exercise.toml");
                if !toml_path.is_file() {
                    continue;
                }
                let text = std::fs::read_to_string(&toml_path)
                    .map_err(|e| GradeError::io(&toml_path, e))?;
                let spec: Spec = toml::from_str(&text).map_err(|e| GradeError::BadSpec {
                    path: toml_path.clone(),
                    message: e.to_string(),
                })?;
                exercises.push(Exercise {
                    id: short_id(&chapter, &exercise),
                    path: format!("{chapter}/{exercise}"),
                    chapter: chapter.clone(),
                    spec,
                });
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
            exercises,
        })
    }

    /// The exercises `selection` names, in catalogue order, each once.
    pub fn select(&self, selection: &Selection) -> Result<Vec<&Exercise>> {
        let Selection::Patterns(patterns) = selection else {
            return Ok(self.exercises.iter().collect());
        };
        let mut keep = vec![false; self.exercises.len()];
        for pattern in patterns {
            let pattern = pattern.trim_end_matches('/');
            let mut any = false;
            for (i, ex) in self.exercises.iter().enumerate() {
                let folder = ex.path.rsplit('/').next().unwrap_or_default();
                let chapter_number = ex.chapter.split('-').next().unwrap_or_default();
                let hit = pattern == ex.id
                    || pattern == ex.path
                    || pattern.ends_with(&format!("/{}", ex.path))
                    || pattern == folder
                    || pattern == ex.chapter
                    || pattern == chapter_number;
                if hit {
                    keep[i] = true;
                    any = true;
                }
            }
            if !any {
                return Err(GradeError::NoMatch {
                    pattern: pattern.to_string(),
                    known: self
                        .exercises
                        .iter()
                        .map(|e| e.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(self
            .exercises
            .iter()
            .zip(keep)
            .filter_map(|(e, k)| k.then_some(e))
            .collect())
    }

    /// The exercise that owns `path` (a file anywhere inside an exercise folder of either tree).
    pub fn owner_of(&self, path: &Path) -> Option<&Exercise> {
        let rel = path.strip_prefix(&self.root).ok()?;
        self.exercises.iter().find(|e| {
            [Variant::Exercises, Variant::Solutions]
                .iter()
                .any(|v| rel.starts_with(Path::new(v.folder()).join(&e.path)))
        })
    }
}

/// What the user asked to grade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Everything (no argument, or `all`).
    All,
    /// Exercise ids, chapters, folder names.
    Patterns(Vec<String>),
}

impl Selection {
    /// Reads the command line's positional arguments.
    pub fn parse(args: &[String]) -> Self {
        if args.is_empty() || args.iter().any(|a| a == "all") {
            Selection::All
        } else {
            Selection::Patterns(args.to_vec())
        }
    }
}

/// The repository root at or above `start`: the first folder with both `exercises/` and a
/// `Cargo.toml`.
pub fn find_root(start: &Path) -> Result<PathBuf> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.join("exercises").is_dir() && d.join("Cargo.toml").is_file() {
            return Ok(d.to_path_buf());
        }
        dir = d.parent();
    }
    Err(GradeError::NoRoot(start.to_path_buf()))
}

fn sorted_dirs(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(GradeError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| GradeError::io(dir, e))?;
        if entry.path().is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}
