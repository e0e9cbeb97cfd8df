//! The language a student reads the grader in: English (the default) or Simplified Chinese
//! (`zh-CN`), chosen with `cargo grade --lang zh-CN` or, without it, from the locale in the
//! environment (`LC_ALL`, then `LC_MESSAGES`, then `LANG`, the first one set and not empty, as
//! POSIX orders them: `LANG=zh_CN.UTF-8` gives zh-CN, `LC_ALL=C` gives English whatever `LANG`
//! says). It picks the hints file (`HINTS.md` or `HINTS.zh-CN.md`) and the texts of
//! [`crate::messages`].
//!
//! ```
//! use grader::lang::Lang;
//! assert_eq!("zh-CN".parse::<Lang>(), Ok(Lang::ZhCn));
//! assert_eq!(Lang::from_locale("zh_CN.UTF-8"), Lang::ZhCn);
//! assert_eq!(Lang::from_locale("en_GB.UTF-8"), Lang::En);
//! let env = |name: &str| (name == "LANG").then(|| "zh_CN.UTF-8".to_string());
//! assert_eq!(Lang::from_vars(env), Lang::ZhCn);
//! assert_eq!(Lang::ZhCn.hints_file(), "HINTS.zh-CN.md");
//! assert_eq!(Lang::ZhCn.readme_file(), "README.zh-CN.md");
//! ```

use std::fmt;
use std::str::FromStr;

/// A language of the grader's student-facing texts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Lang {
    /// English, the default and the fallback.
    #[default]
    En,
    /// Simplified Chinese, as written in mainland China (`zh-CN`).
    ZhCn,
}

/// The locale variables that choose the messages' language, strongest first (POSIX).
pub const LOCALE_VARS: [&str; 3] = ["LC_ALL", "LC_MESSAGES", "LANG"];

impl Lang {
    /// Every language, in the order `--help` lists them.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::ZhCn];

    /// The tag `--lang` takes and the hints file carries: `en`, `zh-CN`.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhCn => "zh-CN",
        }
    }

    /// The name of an exercise's hints file in this language.
    pub fn hints_file(self) -> &'static str {
        match self {
            Lang::En => "HINTS.md",
            Lang::ZhCn => "HINTS.zh-CN.md",
        }
    }

    /// The name of an exercise's task statement in this language.
    pub fn readme_file(self) -> &'static str {
        match self {
            Lang::En => "README.md",
            Lang::ZhCn => "README.zh-CN.md",
        }
    }

    /// The language of a POSIX locale (`zh_CN.UTF-8`, `zh_CN`, `zh_SG.GB18030@euro`, `C`):
    /// Simplified Chinese for `zh`, `zh_CN`, `zh_SG` and `zh_Hans*`; English for everything else,
    /// Traditional Chinese (`zh_TW`, `zh_HK`) included, which these texts are not written in.
    pub fn from_locale(locale: &str) -> Lang {
        // language[_territory][.codeset][@modifier]
        let name = locale.split(['.', '@']).next().unwrap_or_default();
        let name = name.replace('-', "_").to_ascii_lowercase();
        match name.as_str() {
            "zh" | "zh_cn" | "zh_sg" => Lang::ZhCn,
            n if n.starts_with("zh_hans") => Lang::ZhCn,
            _ => Lang::En,
        }
    }

    /// The language the locale variables ask for, read with `var` (the first of
    /// [`LOCALE_VARS`] that is set and not empty decides); English when none is set.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Lang {
        LOCALE_VARS
            .iter()
            .filter_map(|name| var(name))
            .find(|value| !value.trim().is_empty())
            .map_or(Lang::En, |value| Lang::from_locale(value.trim()))
    }

    /// The language this process's environment asks for.
    pub fn from_env() -> Lang {
        Lang::from_vars(|name| std::env::var(name).ok())
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl FromStr for Lang {
    type Err = String;

    /// `en` or `zh-CN` (case and `-`/`_` do not matter; `zh` and `zh-Hans` mean zh-CN, `en-US`
    /// and the like mean English). Anything else is refused, with the list of languages.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let tag = s.trim().replace('_', "-").to_ascii_lowercase();
        match tag.as_str() {
            "zh" | "zh-cn" | "zh-sg" | "zh-hans" | "zh-hans-cn" => Ok(Lang::ZhCn),
            t if t == "en" || t.starts_with("en-") => Ok(Lang::En),
            _ => Err(format!(
                "unknown language '{s}': the grader speaks {} (e.g. --lang zh-CN)",
                Lang::ALL.map(Lang::code).join(" and ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_strongest_locale_variable_decides() {
        assert_eq!(Lang::from_vars(vars(&[])), Lang::En);
        assert_eq!(
            Lang::from_vars(vars(&[("LANG", "zh_CN.UTF-8")])),
            Lang::ZhCn
        );
        assert_eq!(
            Lang::from_vars(vars(&[
                ("LANG", "en_US.UTF-8"),
                ("LC_MESSAGES", "zh_CN.utf8")
            ])),
            Lang::ZhCn
        );
        // LC_ALL=C is how scripts ask for untranslated output.
        assert_eq!(
            Lang::from_vars(vars(&[("LANG", "zh_CN.UTF-8"), ("LC_ALL", "C")])),
            Lang::En
        );
        // Set but empty means not set.
        assert_eq!(
            Lang::from_vars(vars(&[("LANG", "zh_CN.UTF-8"), ("LC_ALL", "")])),
            Lang::ZhCn
        );
    }

    #[test]
    fn locales_and_tags() {
        for zh in [
            "zh_CN",
            "zh_CN.GB18030",
            "zh_SG.UTF-8@x",
            "zh",
            "zh_Hans_CN",
        ] {
            assert_eq!(Lang::from_locale(zh), Lang::ZhCn, "{zh}");
        }
        for en in [
            "C",
            "POSIX",
            "C.UTF-8",
            "en_US.UTF-8",
            "zh_TW.UTF-8",
            "de_DE",
            "",
        ] {
            assert_eq!(Lang::from_locale(en), Lang::En, "{en}");
        }
        assert_eq!("zh_cn".parse::<Lang>(), Ok(Lang::ZhCn));
        assert_eq!("EN-gb".parse::<Lang>(), Ok(Lang::En));
        let err = "fr".parse::<Lang>().unwrap_err();
        assert!(
            err.contains("'fr'") && err.contains("en and zh-CN"),
            "{err}"
        );
        for lang in Lang::ALL {
            assert_eq!(lang.code().parse::<Lang>(), Ok(lang));
        }
    }
}
