//! The texts a student reads in their own `cargo grade` run, in each [`Lang`]: the progress
//! lines, the table's headings and statuses, the failure explanations the grader writes (a time
//! limit, a crash, a missing test; the test's own panic message stays as the test wrote it), the
//! summary line, the next steps and the hint prompts.
//!
//! A table of `match`es rather than an i18n crate (fluent, gettext): two languages and some
//! thirty texts, whose placeholders the compiler checks here, where a catalogue file would check
//! them only when the text is shown. A teacher's output (`--class`, `--root`, `--wrong`, the
//! handout) stays English, as does everything written for machines (JSON field names, JUnit).
//!
//! ```
//! use grader::{lang::Lang, messages::Messages};
//! assert_eq!(Messages::new(Lang::En).hint_header("01-1", "Fix", 1, 2), "01-1 Fix: hint 1 of 2");
//! assert!(Messages::new(Lang::ZhCn).hint_header("01-1", "Fix", 1, 2).contains("第 1 条提示"));
//! ```

use crate::lang::Lang;
use crate::runner::Status;

/// The student-facing texts in one language.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Messages {
    /// Their language.
    pub lang: Lang,
}

impl Messages {
    /// The texts in `lang`.
    pub fn new(lang: Lang) -> Self {
        Self { lang }
    }

    fn zh(self) -> bool {
        self.lang == Lang::ZhCn
    }

    // ---- hints (`cargo grade 01-1 --hint`) ----

    /// The line above a hint.
    pub fn hint_header(self, id: &str, title: &str, shown: usize, of: usize) -> String {
        if self.zh() {
            format!("{id} {title}：第 {shown} 条提示（共 {of} 条）")
        } else {
            format!("{id} {title}: hint {shown} of {of}")
        }
    }

    /// The line below a hint that is not the last.
    pub fn hint_again(self, next: usize) -> String {
        if self.zh() {
            format!("（再运行一次可看第 {next} 条提示）")
        } else {
            format!("(run it again for hint {next})")
        }
    }

    /// The exercise has no hints file in this language: the English one is shown.
    pub fn hints_in_english(self, missing: &str) -> String {
        if self.zh() {
            format!("注意：这个练习还没有中文提示（{missing}），下面显示英文提示（HINTS.md）。")
        } else {
            format!("note: this exercise has no {missing}; showing HINTS.md")
        }
    }

    // ---- progress, on stderr ----

    /// Before an exercise's build starts.
    pub fn grading(self, id: &str, title: &str) -> String {
        if self.zh() {
            format!("正在评分 {id} {title}（正在构建；一个练习的第一次构建需要一些时间）")
        } else {
            format!("grading {id} {title} (building; the first build of an exercise takes a while)")
        }
    }

    /// The progress line of a build that failed.
    pub fn exercise_does_not_compile(self, id: &str, first_error: &str) -> String {
        if self.zh() {
            format!("  {id} 无法编译：{first_error}")
        } else {
            format!("  {id} does not compile: {first_error}")
        }
    }

    /// A test runs long.
    pub fn still_running(self, name: &str, after_s: u64, limit_s: u64) -> String {
        if self.zh() {
            format!("  ...   {name} 已运行超过 {after_s} 秒（时间限制 {limit_s} 秒，仍在计时）")
        } else {
            format!("  ...   {name} still running after {after_s} s; the time limit of {limit_s} s is counting")
        }
    }

    /// A graded test's status, as the table and the progress lines show it (the JSON and JUnit
    /// reports keep [`Status::label`]).
    pub fn status(self, status: Status) -> &'static str {
        if !self.zh() {
            return status.label();
        }
        match status {
            Status::Passed => "通过",
            Status::Failed => "失败",
            Status::TimedOut => "超时",
            Status::Crashed => "崩溃",
            Status::CompileError => "编译失败",
            Status::Missing => "缺失",
            Status::Exited => "提前退出",
            Status::NotRun => "未运行",
        }
    }

    // ---- failure explanations (a test's message when the grader, not the test, wrote it) ----

    /// Every test's message when the exercise does not compile.
    pub fn does_not_compile(self, first_error: &str) -> String {
        if self.zh() {
            format!("无法编译：{first_error}")
        } else {
            format!("does not compile: {first_error}")
        }
    }

    /// A hidden test, in a student's own run.
    pub fn hidden_test(self) -> String {
        if self.zh() {
            "隐藏测试：由老师评分时运行".into()
        } else {
            "a hidden test: your teacher's grading runs it".into()
        }
    }

    /// A graded test that is not in the test binary.
    pub fn not_in_binary(self, full: &str) -> String {
        if self.zh() {
            format!("测试 {full} 不在测试二进制文件中：是改动了 tests/grade.rs，还是从 src/lib.rs 中删掉了它的 `mod grade`？")
        } else {
            format!("test {full} is not in the test binary: was tests/grade.rs changed, or its `mod grade` removed from src/lib.rs?")
        }
    }

    /// A test or program killed at its time limit.
    pub fn timed_out(self, limit_s: u64) -> String {
        if self.zh() {
            format!("超过了 {limit_s} 秒的时间限制，已连同它启动的一切被终止（死循环、死锁，还是工作量太大？）")
        } else {
            format!("killed after the time limit of {limit_s} s, with everything it started (an endless loop, a deadlock, or far too much work?)")
        }
    }

    /// A test's program that does not build with the student's code.
    pub fn program_does_not_compile(self, name: &str, first_error: &str) -> String {
        if self.zh() {
            format!("程序 {name} 用你的代码无法编译：{first_error}")
        } else {
            format!("the program {name} does not compile with your code: {first_error}")
        }
    }

    /// A `compile_fail` test's program does not build even with its right line: the crate is
    /// broken elsewhere, which is not the refusal the test wants.
    pub fn control_does_not_compile(self, name: &str, first_error: &str) -> String {
        if self.zh() {
            format!("程序 {name} 即使不带它的错误（用 #[cfg(not(grade_mistake))] 下那行正确的代码）也无法用你的代码编译，所以这不是测试要的拒绝：{first_error}")
        } else {
            format!("the program {name} does not compile with your code even without its mistake (with the right line, under #[cfg(not(grade_mistake))]), so this is not the refusal the test wants: {first_error}")
        }
    }

    /// A `compile_fail` test's program compiles with its mistake: the API accepts it.
    pub fn mistake_compiles(self, name: &str, expected: &str) -> String {
        if self.zh() {
            format!("程序 {name} 带着它的错误（#[cfg(grade_mistake)] 下的那行）也能编译，但你的代码必须让编译器拒绝它：应当出现一个包含 `{expected}` 的编译错误")
        } else {
            format!("the program {name} compiles with its mistake (the line under #[cfg(grade_mistake)]), but your code must make the compiler refuse it: expected a compile error containing `{expected}`")
        }
    }

    /// A `compile_fail` test's program is refused, but not with the expected error.
    pub fn refused_otherwise(self, name: &str, expected: &str, first_error: &str) -> String {
        if self.zh() {
            format!("程序 {name} 被拒绝了，但原因不对：应当在这个程序里出现一个包含 `{expected}` 的错误；编译器说的是：{first_error}")
        } else {
            format!("the program {name} is refused, but not for the expected reason: expected an error in the program containing `{expected}`; the compiler said: {first_error}")
        }
    }

    /// A submitted file names the switch that turns the programs' mistakes on.
    pub fn names_the_switch(self, file: &str, switch: &str) -> String {
        if self.zh() {
            format!(
                "{file} 提到了 `{switch}`，也就是打开评分程序里那些错误的开关：你的文件不能检测它"
            )
        } else {
            format!("{file} names `{switch}`, the switch that turns on the graded programs' mistakes: a file of yours may not test for it")
        }
    }

    /// A test's program that exited with an error status.
    pub fn program_failed(self, name: &str, code: i32, tail: &str) -> String {
        if self.zh() {
            format!("程序 {name} 失败（退出状态 {code}）：{tail}")
        } else {
            format!("the program {name} failed (exit status {code}): {tail}")
        }
    }

    /// A test's program killed by a signal.
    pub fn program_died(self, name: &str, signal: i32, tail: &str) -> String {
        if self.zh() {
            format!("程序 {name} 异常终止（信号 {signal}）：{tail}")
        } else {
            format!("the program {name} died (signal {signal}): {tail}")
        }
    }

    /// A test process killed at its time limit, when the limit is not known here.
    pub fn timed_out_short(self) -> String {
        if self.zh() {
            "超时".into()
        } else {
            "timed out".into()
        }
    }

    /// libtest ran, but not this test.
    pub fn did_not_run(self, name: &str) -> String {
        if self.zh() {
            format!("{name} 没有运行")
        } else {
            format!("{name} did not run")
        }
    }

    /// What a process that ended early printed last, appended to the explanation.
    pub fn it_printed(self, tail: &str) -> String {
        if tail.is_empty() {
            String::new()
        } else if self.zh() {
            format!("；它最后输出了：{tail}")
        } else {
            format!("; it printed: {tail}")
        }
    }

    /// The test process exited (with `said`, from [`Self::it_printed`]) before the test ended.
    pub fn exited_early(self, code: i32, said: &str) -> String {
        if self.zh() {
            format!("测试进程在测试结束之前就退出了（退出码 {code}）：你的代码可能调用了 std::process::exit 或 abort{said}")
        } else {
            format!("the test process ended (exit code {code}) before the test finished: your code may have called std::process::exit or abort{said}")
        }
    }

    /// The test process died silently.
    pub fn died_silently(self, signal: i32) -> String {
        if self.zh() {
            format!("测试进程在测试结束之前异常终止（信号 {signal}），没有 panic 信息：你的代码可能调用了 abort、栈溢出了，或者在原生代码中崩溃了")
        } else {
            format!("the test process died (signal {signal}) before the test finished, without a panic message: your code may have called abort, overflowed its stack, or crashed in native code")
        }
    }

    /// The test process died, with its last words.
    pub fn died(self, signal: i32, tail: &str) -> String {
        if self.zh() {
            format!("测试进程在测试结束之前异常终止（信号 {signal}）：{tail}")
        } else {
            format!("the test process died (signal {signal}) before the test finished: {tail}")
        }
    }

    // ---- the table, the summary, the next steps ----

    /// The table's column headings: exercise, test, points, status, message.
    pub fn headings(self) -> [&'static str; 5] {
        if self.zh() {
            ["练习", "测试", "得分", "状态", "信息"]
        } else {
            ["exercise", "test", "points", "status", "message"]
        }
    }

    /// The status of an exercise whose graded files changed.
    pub fn modified(self) -> &'static str {
        if self.zh() {
            "已改动"
        } else {
            "MODIFIED"
        }
    }

    /// Its message.
    pub fn points_withheld(self, files: &str) -> String {
        if self.zh() {
            format!("不计分：评分文件 {files} 被改动了（用 git checkout 恢复）")
        } else {
            format!("points withheld: {files} (restore with git checkout)")
        }
    }

    /// The summary line; `bar` is `[#####-----]`.
    #[allow(clippy::too_many_arguments)] // one sentence's numbers, named where they are used
    pub fn summary(
        self,
        points: u32,
        max: u32,
        percent: u32,
        bar: &str,
        complete: usize,
        exercises: usize,
        passed: usize,
        tests: usize,
    ) -> String {
        if self.zh() {
            format!("{points}/{max} 分（{percent}%）{bar}  完成 {complete}/{exercises} 个练习，通过 {passed}/{tests} 个测试")
        } else {
            format!("{points}/{max} points ({percent}%) {bar}  {complete}/{exercises} exercises complete, {passed}/{tests} tests passed")
        }
    }

    /// Where the reports were written.
    pub fn reports(self, json: &str, junit: &str) -> String {
        if self.zh() {
            format!("报告：{json} 和 {junit}")
        } else {
            format!("reports: {json} and {junit}")
        }
    }

    /// Every selected exercise has full marks.
    pub fn all_done(self) -> String {
        if self.zh() {
            "全部完成：所选的每个练习都拿到了满分。".into()
        } else {
            "All done: every selected exercise has full marks.".into()
        }
    }

    /// The first line of the next steps.
    pub fn next(self, id: &str, title: &str, points: u32, max: u32) -> String {
        if self.zh() {
            format!("下一步：{id} {title}（{points}/{max} 分）\n")
        } else {
            format!("Next: {id} {title} ({points}/{max} points)\n")
        }
    }

    /// Next steps: the graded files were changed.
    pub fn restore_graded_files(self) -> String {
        if self.zh() {
            "  它的评分文件被改动了，请恢复：git checkout -- exercises/\n".into()
        } else {
            "  its graded files were changed; restore them: git checkout -- exercises/\n".into()
        }
    }

    /// Next steps: the compiler's errors follow.
    pub fn it_does_not_compile(self) -> String {
        if self.zh() {
            "  它无法编译：\n".into()
        } else {
            "  it does not compile:\n".into()
        }
    }

    /// Next steps, grading `--solutions`: the reference fails.
    pub fn reference_fails(self, path: &str) -> String {
        if self.zh() {
            format!("  solutions/{path} 中的参考答案没有通过：见上面的信息")
        } else {
            format!("  the reference solution in solutions/{path} fails: see its messages above")
        }
    }

    /// Next steps: what to read, edit and run (`folder/path` is the exercise's folder, `readme`
    /// the task's file in this language: [`crate::lang::Lang::readme_file`] where it exists). In
    /// Chinese every command carries `--lang zh-CN`, so that what it prints stays Chinese
    /// whatever the environment says.
    pub fn work_on(self, folder: &str, path: &str, id: &str, readme: &str) -> String {
        if self.zh() {
            format!(
                "  阅读   {folder}/{path}/{readme}\n  修改   {folder}/{path}/src/ 中的 TODO: 标记\n  提示   cargo grade {id} --hint --lang zh-CN\n  检查   cargo grade {id} --lang zh-CN   （或用 cargo grade --watch --lang zh-CN 在每次保存时重新评分）"
            )
        } else {
            format!(
                "  read   {folder}/{path}/{readme}\n  edit   the TODO: markers in {folder}/{path}/src/\n  hint   cargo grade {id} --hint\n  check  cargo grade {id}   (or cargo grade --watch to re-grade on save)"
            )
        }
    }

    /// The student changed files that a teacher's grading ignores.
    pub fn changes_ignored(self, changed: &str, example: &str) -> String {
        if self.zh() {
            format!("警告：你改动了 {changed}；老师给你的仓库评分时，只对每个练习要求你修改的文件（其 exercise.toml 中的 `edit`，例如 {example}）评分：其他改动会被忽略，不会编译")
        } else {
            format!("warning: you changed {changed}; only the files each exercise asks you to edit (`edit` in its exercise.toml, e.g. {example}) are graded when your teacher grades your clone: other changes are ignored, not compiled")
        }
    }

    /// What joins the files of a list: `, ` in English, the enumeration comma `、` in Chinese.
    pub fn list_separator(self) -> &'static str {
        if self.zh() {
            "、"
        } else {
            ", "
        }
    }

    /// `and 3 more`, after the first files of a list (joined with [`Self::list_separator`]).
    pub fn and_more(self, more: usize) -> String {
        if self.zh() {
            format!("，以及另外 {more} 个文件")
        } else {
            format!(" and {more} more")
        }
    }

    /// Watch mode starts.
    pub fn watching(self, dir: &str) -> String {
        if self.zh() {
            format!("正在监视 {dir} 的改动（按 Ctrl-C 停止）")
        } else {
            format!("watching {dir} for changes (Ctrl-C to stop)")
        }
    }
}

/// How many terminal columns `text` takes: Chinese characters take two. Hand-written (rather
/// than the `unicode-width` crate) because the grader's texts hold only ASCII and CJK.
pub fn display_width(text: &str) -> usize {
    text.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum()
}

/// `text` padded with spaces to `width` columns.
pub fn pad(text: &str, width: usize) -> String {
    format!(
        "{text}{}",
        " ".repeat(width.saturating_sub(display_width(text)))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_text_differs_between_languages() {
        let (en, zh) = (Messages::new(Lang::En), Messages::new(Lang::ZhCn));
        let pairs = [
            (en.hint_again(2), zh.hint_again(2)),
            (en.timed_out(5), zh.timed_out(5)),
            (en.all_done(), zh.all_done()),
            (
                en.work_on("exercises", "01-a/1-b", "01-1", "README.md"),
                zh.work_on("exercises", "01-a/1-b", "01-1", "README.zh-CN.md"),
            ),
            (
                en.summary(1, 2, 50, "[#-]", 0, 1, 1, 2),
                zh.summary(1, 2, 50, "[#-]", 0, 1, 1, 2),
            ),
        ];
        for (e, z) in pairs {
            assert_ne!(e, z);
            assert!(e.is_ascii(), "{e}");
            assert!(!z.is_ascii(), "{z}");
        }
        // The commands a student copies stay commands in every language.
        // Every command a Chinese run suggests keeps the language, or its output would switch
        // back to English (or to the locale's language) half-way through a lesson.
        let steps = zh.work_on("exercises", "p", "01-1", "README.zh-CN.md");
        assert!(steps.contains("p/README.zh-CN.md"), "{steps}");
        let commands: Vec<&str> = steps
            .split("cargo grade")
            .skip(1)
            .map(|c| c.split(['（', '）', '\n']).next().unwrap_or_default())
            .collect();
        assert_eq!(commands.len(), 3, "{steps}");
        for command in commands {
            assert!(
                command.contains("--lang zh-CN"),
                "'cargo grade{command}' drops the language"
            );
        }
        assert!(
            steps.contains("cargo grade 01-1 --hint --lang zh-CN"),
            "{steps}"
        );
        assert!(!en
            .work_on("exercises", "p", "01-1", "README.md")
            .contains("--lang"));
        assert!(zh
            .still_running("t", 10, 60)
            .contains("（时间限制 60 秒，仍在计时）"));
        assert_eq!(zh.and_more(3), "，以及另外 3 个文件");
        assert_eq!(zh.list_separator(), "、");
        assert!(zh.timed_out(5).contains("5 秒"));
        for s in [
            Status::Passed,
            Status::Failed,
            Status::TimedOut,
            Status::NotRun,
        ] {
            assert_eq!(en.status(s), s.label());
            assert_ne!(zh.status(s), s.label());
        }
    }

    #[test]
    fn widths_count_chinese_twice() {
        assert_eq!(display_width("pass"), 4);
        assert_eq!(display_width("通过"), 4);
        assert_eq!(pad("通过", 8), "通过    ");
        assert_eq!(pad("TIMEOUT", 8), "TIMEOUT ");
    }
}
