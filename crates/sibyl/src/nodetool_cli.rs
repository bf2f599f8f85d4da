//! `nodetool`'s command line, as Cassandra's: the same verbs, options
//! (Cassandra's `-pr`, `-full`, `-st` single-dash names too), the same help
//! text and the same parse errors.
//!
//! Each verb's help is Cassandra 5.0.4's own (`nodetool help VERB`, kept in
//! `nodetool_help/`), and the options are read from it, so what the help
//! says is what the parser accepts. clap does the parsing: global options
//! anywhere, values, `--`. An option Cassandra has and Sibyl does not carry
//! out is refused by the verb, naming it (see [`UNSUPPORTED`]).

use clap::{Arg, ArgAction, Command};

macro_rules! help_texts {
    ($($verb:literal),* $(,)?) => {
        &[$(($verb, include_str!(concat!("nodetool_help/", $verb, ".txt")))),*]
    };
}

/// Every verb Sibyl carries out, with Cassandra's help for it.
const HELP: &[(&str, &str)] = help_texts!(
    "assassinate",
    "autorepairstatus",
    "cleanup",
    "clearsnapshot",
    "compact",
    "compactionhistory",
    "compactionstats",
    "decommission",
    "describecluster",
    "disablebinary",
    "disablegossip",
    "disablehandoff",
    "disablehintsfordc",
    "drain",
    "enablebinary",
    "enablegossip",
    "enablehandoff",
    "enablehintsfordc",
    "flush",
    "getcompactionthroughput",
    "getendpoints",
    "getinterdcstreamthroughput",
    "getlogginglevels",
    "getmaxhintwindow",
    "getstreamthroughput",
    "gettraceprobability",
    "gcstats",
    "gossipinfo",
    "info",
    "invalidatekeycache",
    "invalidaterowcache",
    "listpendinghints",
    "listsnapshots",
    "netstats",
    "pausehandoff",
    "removenode",
    "repair",
    "resumehandoff",
    "proxyhistograms",
    "rebuild",
    "ring",
    "setautorepairconfig",
    "setinterdcstreamthroughput",
    "setcompactionthroughput",
    "setlogginglevel",
    "sethintedhandoffthrottlekb",
    "setmaxhintwindow",
    "setstreamthroughput",
    "settraceprobability",
    "snapshot",
    "status",
    "statusbinary",
    "statusgossip",
    "statushandoff",
    "tablehistograms",
    "tablestats",
    "tpstats",
    "truncatehints",
    "upgradesstables",
    "version",
);

/// Names older releases used, still taken (Cassandra 5.0 dropped them).
const ALIASES: &[(&str, &str)] = &[
    ("cfstats", "tablestats"),
    ("cfhistograms", "tablehistograms"),
];

/// Options Cassandra's help lists that Sibyl does not carry out: refused by
/// name rather than ignored, so that nobody believes they took effect.
pub const UNSUPPORTED: &[(&str, &str)] = &[
    ("clearsnapshot", "--older-than"),
    ("clearsnapshot", "--older-than-timestamp"),
    ("compact", "--end-token"),
    ("compact", "--partition"),
    ("compact", "--start-token"),
    ("compact", "--user-defined"),
    ("decommission", "--force"),
    ("disablebinary", "--force"),
    ("getcompactionthroughput", "--precise-mib"),
    ("getinterdcstreamthroughput", "--entire-sstable-throughput"),
    ("setinterdcstreamthroughput", "--entire-sstable-throughput"),
    ("getstreamthroughput", "--entire-sstable-throughput"),
    ("info", "--out-of-range-ops"),
    ("info", "--tokens"),
    ("listsnapshots", "--ephemeral"),
    ("listsnapshots", "--no-ttl"),
    ("repair", "--in-dc"),
    ("repair", "--force"),
    ("repair", "--in-hosts"),
    ("repair", "--ignore-unreplicated-keyspaces"),
    ("repair", "--optimise-streams"),
    ("repair", "--paxos-only"),
    ("repair", "--pull"),
    ("repair", "--preview"),
    ("repair", "--skip-paxos"),
    ("repair", "--trace"),
    ("repair", "--validate"),
    ("ring", "--resolve-ip"),
    ("gossipinfo", "--resolve-ip"),
    ("setstreamthroughput", "--entire-sstable-throughput"),
    ("snapshot", "--column-family"),
    ("snapshot", "--kt-list"),
    ("snapshot", "--skip-flush"),
    ("snapshot", "--ttl"),
    ("status", "--resolve-ip"),
    ("tablestats", "--sstable-location-check"),
    ("tablestats", "--sort"),
    ("tablestats", "--top"),
    ("tablestats", "-i"),
    ("upgradesstables", "--max-timestamp"),
];

/// One option as the help describes it: its names (`-pr`,
/// `--partitioner-range`) and the name of its value, if it takes one.
#[derive(Debug, Clone, PartialEq)]
pub struct OptSpec {
    pub names: Vec<String>,
    pub value: Option<String>,
}

impl OptSpec {
    /// The name the verbs see: the first `--long` one, else the only one.
    pub fn canonical(&self) -> &str {
        self.names
            .iter()
            .find(|n| n.starts_with("--"))
            .unwrap_or(&self.names[0])
    }

    fn id(&self) -> String {
        self.canonical().trim_start_matches('-').to_string()
    }
}

/// A verb as its help describes it.
#[derive(Debug, Clone)]
pub struct VerbSpec {
    pub name: String,
    pub about: String,
    pub options: Vec<OptSpec>,
    /// The arguments' usage (`[<keyspace> <tables>...]`), if it takes any.
    pub args: Option<String>,
    pub help: &'static str,
}

impl VerbSpec {
    /// How many arguments it takes: at least, at most (None: any number).
    pub fn arity(&self) -> (usize, Option<usize>) {
        // its help says "Will reset to initial level if omitted"
        if self.name == "setlogginglevel" {
            return (0, Some(2));
        }
        let Some(u) = &self.args else {
            return (0, Some(0));
        };
        let first = u.split(" | ").next().unwrap_or(u);
        let first = first.split('|').next().unwrap_or(first);
        let words = first
            .split_whitespace()
            .filter(|w| w.contains('<') || w.chars().any(|c| c.is_alphanumeric()))
            .count()
            .max(1);
        let max = if u.contains("...") { None } else { Some(words) };
        let min = if u.trim_start().starts_with('[') {
            0
        } else {
            words
        };
        (min, max)
    }

    /// What Cassandra names the missing arguments: `<ip_address>` is "ip
    /// address".
    fn args_title(&self) -> String {
        self.args
            .as_deref()
            .unwrap_or("")
            .replace(['<', '>', '[', ']'], "")
            .replace('_', " ")
    }
}

/// Reads a verb's help: the NAME line and the OPTIONS section.
pub fn parse_help(verb: &str, help: &'static str) -> VerbSpec {
    let lines: Vec<&str> = help.lines().collect();
    // the NAME section, which may wrap over several lines
    let name: Vec<&str> = lines
        .iter()
        .skip_while(|l| **l != "NAME")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim())
        .collect();
    let about = name
        .join(" ")
        .strip_prefix(&format!("nodetool {verb} - "))
        .map(str::to_string)
        .unwrap_or_default();
    let mut options = Vec::new();
    let mut args = None;
    let mut after_dashes = false;
    let start = lines
        .iter()
        .position(|l| *l == "OPTIONS")
        .map(|i| i + 1)
        .unwrap_or(lines.len());
    for l in &lines[start..] {
        // entries start at 8 spaces; their descriptions at 12
        if !l.starts_with("        ") || l.starts_with("            ") {
            continue;
        }
        let entry = l.trim();
        if entry == "--" {
            after_dashes = true;
            continue;
        }
        if after_dashes || !entry.starts_with('-') {
            args = Some(entry.to_string());
            continue;
        }
        let mut names = Vec::new();
        let mut value = None;
        for n in entry.split(", ") {
            let mut it = n.splitn(2, ' ');
            names.push(it.next().unwrap_or("").to_string());
            if let Some(v) = it.next() {
                value = Some(v.trim_matches(['<', '>']).to_string());
            }
        }
        options.push(OptSpec { names, value });
    }
    // whether the arguments are optional is the SYNOPSIS's to say (`ring`'s
    // OPTIONS entry reads `<keyspace>`, its SYNOPSIS `[<keyspace>]`)
    let synopsis: String = lines
        .iter()
        .skip_while(|l| **l != "SYNOPSIS")
        .take_while(|l| **l != "OPTIONS")
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    if let Some((_, tail)) = synopsis.rsplit_once("[--] ") {
        let tail = tail.trim();
        if !tail.is_empty() {
            args = Some(tail.to_string());
        }
    }
    VerbSpec {
        name: verb.to_string(),
        about,
        options,
        args,
        help,
    }
}

/// Every verb's spec, in name order.
pub fn verbs() -> Vec<VerbSpec> {
    HELP.iter().map(|(v, h)| parse_help(v, h)).collect()
}

/// The global options (`-h`, `-p`, `-pp`, `-pw`, `-pwf`, `-u`): the ones every
/// verb's help lists.
fn is_global(o: &OptSpec) -> bool {
    matches!(
        o.canonical(),
        "--host" | "--port" | "--print-port" | "--password" | "--password-file" | "--username"
    )
}

/// What the command line asked for.
#[derive(Debug, PartialEq)]
pub enum Invocation {
    /// `help` or `help VERB`: the text to print.
    Help(String),
    Run(Parsed),
}

#[derive(Debug, PartialEq)]
pub struct Parsed {
    pub host: String,
    pub port: u16,
    pub verb: String,
    /// The verb's arguments, then its options by their canonical names
    /// (`--partitioner-range`, `--start-token TOKEN`, `-t TAG`).
    pub args: Vec<String>,
    /// The verb's arguments alone.
    pub positional: Vec<String>,
}

impl Parsed {
    /// The value of a verb option given by its canonical name.
    pub fn option(&self, name: &str) -> Option<&str> {
        let i = self.args.iter().position(|a| a == name)?;
        self.args.get(i + 1).map(String::as_str)
    }
}

/// A parse error in Cassandra's words; printed as `nodetool: MESSAGE` and a
/// pointer to the help, exit status 1.
#[derive(Debug, PartialEq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "nodetool: {}\nSee 'nodetool help' or 'nodetool help <command>'.",
            self.0
        )
    }
}

/// `nodetool help`: Cassandra's layout, the verbs Sibyl carries out.
pub fn overview() -> String {
    let mut s = String::from(
        "usage: nodetool [(-pw <password> | --password <password>)]
        [(-pp | --print-port)] [(-p <port> | --port <port>)]
        [(-pwf <passwordFilePath> | --password-file <passwordFilePath>)]
        [(-h <host> | --host <host>)] [(-u <username> | --username <username>)]
        <command> [<args>]

The most commonly used nodetool commands are:
",
    );
    for v in verbs() {
        s.push_str(&format!("    {:<36}{}\n", v.name, v.about));
    }
    s.push_str("\nSee 'nodetool help <command>' for more information on a specific command.\n");
    s
}

fn arg_for(o: &OptSpec) -> Arg {
    let id = o.id();
    let mut a = Arg::new(id.clone()).long(id);
    for n in &o.names {
        let bare = n.trim_start_matches('-');
        if n.starts_with("--") {
            if bare != o.id() {
                a = a.alias(bare.to_string());
            }
        } else if bare.len() == 1 {
            if let Some(c) = bare.chars().next() {
                a = a.short(c);
            }
        }
    }
    match &o.value {
        Some(v) => a
            .value_name(v.clone())
            .action(ArgAction::Append)
            .num_args(1)
            .allow_hyphen_values(true),
        None => a.action(ArgAction::SetTrue),
    }
}

/// Cassandra's multi-letter single-dash names (`-pr`, `-full`, `-pwf`) as
/// their long form, which clap takes; for the verb being parsed and the
/// global options. Stops at `--`.
fn normalise(tokens: &[String], specs: &[VerbSpec]) -> Vec<String> {
    let global: Vec<OptSpec> = specs
        .first()
        .map(|v| v.options.iter().filter(|o| is_global(o)).cloned().collect())
        .unwrap_or_default();
    let mut verb: Option<&VerbSpec> = None;
    let mut out = Vec::with_capacity(tokens.len());
    let mut it = tokens.iter();
    while let Some(t) = it.next() {
        if t == "--" {
            out.push(t.clone());
            out.extend(it.cloned());
            break;
        }
        let opts = global
            .iter()
            .chain(verb.map(|v| v.options.iter()).into_iter().flatten());
        let found = opts.clone().find(|o| o.names.iter().any(|n| n == t));
        match found {
            Some(o) => {
                let single = t.len() > 2 && !t.starts_with("--");
                out.push(if single {
                    format!("--{}", o.id())
                } else {
                    t.clone()
                });
                if o.value.is_some() {
                    if let Some(v) = it.next() {
                        out.push(v.clone());
                    }
                }
            }
            None => {
                if verb.is_none() && !t.starts_with('-') {
                    let name = ALIASES
                        .iter()
                        .find(|(a, _)| a == t)
                        .map(|(_, v)| *v)
                        .unwrap_or(t);
                    verb = specs.iter().find(|v| v.name == name);
                    out.push(name.to_string());
                } else {
                    out.push(t.clone());
                }
            }
        }
    }
    out
}

fn command(specs: &[VerbSpec]) -> Command {
    let mut cmd = Command::new("nodetool")
        .no_binary_name(true)
        .disable_help_flag(true)
        .disable_help_subcommand(true)
        .disable_version_flag(true)
        .subcommand_required(true);
    if let Some(first) = specs.first() {
        for o in first.options.iter().filter(|o| is_global(o)) {
            cmd = cmd.arg(arg_for(o).global(true));
        }
    }
    for v in specs {
        let mut sub = Command::new(v.name.clone())
            .disable_help_flag(true)
            .about(v.about.clone());
        for o in v.options.iter().filter(|o| !is_global(o)) {
            sub = sub.arg(arg_for(o));
        }
        sub = sub.arg(
            Arg::new("args")
                .num_args(0..)
                .action(ArgAction::Append)
                .trailing_var_arg(false),
        );
        cmd = cmd.subcommand(sub);
    }
    cmd
}

/// Parses nodetool's command line (what follows `sibyl nodetool`).
pub fn parse(tokens: &[String]) -> Result<Invocation, UsageError> {
    let specs = verbs();
    // `help`, `help VERB`, `VERB --help`
    // (the words that are not options, nor the values of global options)
    let mut words: Vec<&String> = Vec::new();
    let mut it = tokens.iter();
    while let Some(t) = it.next() {
        if matches!(
            t.as_str(),
            "-h" | "--host"
                | "-p"
                | "--port"
                | "-pw"
                | "--password"
                | "-pwf"
                | "--password-file"
                | "-u"
                | "--username"
        ) {
            it.next();
        } else if !t.starts_with('-') {
            words.push(t);
        }
    }
    if tokens.is_empty() || words.first().map(|w| w.as_str()) == Some("help") {
        return Ok(Invocation::Help(match words.get(1) {
            None => overview(),
            Some(v) => match specs.iter().find(|s| s.name == **v) {
                Some(s) => s.help.to_string(),
                None => format!("Unknown command {v}\n\n"),
            },
        }));
    }
    if tokens.iter().any(|t| t == "--help") {
        if let Some(s) = words
            .iter()
            .find_map(|w| specs.iter().find(|s| s.name == **w))
        {
            return Ok(Invocation::Help(s.help.to_string()));
        }
    }
    let normalised = normalise(tokens, &specs);
    let m = command(&specs)
        .try_get_matches_from(&normalised)
        .map_err(|e| usage_error(&e, &normalised, &specs))?;
    let (verb, sub) = m
        .subcommand()
        .ok_or_else(|| UsageError("No command specified".into()))?;
    let spec = specs
        .iter()
        .find(|s| s.name == verb)
        .ok_or_else(|| UsageError(format!("Found unexpected parameters: [{verb}]")))?;
    let global = |id: &str| {
        sub.get_one::<String>(id)
            .or_else(|| m.get_one::<String>(id))
    };
    let host = global("host")
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".into());
    let port = match global("port") {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| UsageError(format!("Invalid value for option 'port': {p}")))?,
        None => 7199,
    };
    let mut args: Vec<String> = sub
        .get_many::<String>("args")
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let positional = args.clone();
    let (min, max) = spec.arity();
    if args.len() < min {
        return Err(UsageError(format!(
            "Required parameters are missing: {}",
            spec.args_title()
        )));
    }
    if let Some(max) = max {
        if args.len() > max {
            return Err(UsageError(format!(
                "Found unexpected parameters: [{}]",
                args[max..].join(", ")
            )));
        }
    }
    for o in spec.options.iter().filter(|o| !is_global(o)) {
        let id = o.id();
        let given = match &o.value {
            Some(_) => sub
                .get_many::<String>(&id)
                .map(|vs| vs.cloned().collect::<Vec<_>>())
                .unwrap_or_default(),
            None => {
                if sub.get_flag(&id) {
                    vec![String::new()]
                } else {
                    vec![]
                }
            }
        };
        for v in given {
            let name = o.canonical().to_string();
            if UNSUPPORTED.contains(&(verb, name.as_str())) {
                return Err(UsageError(format!(
                    "Sibyl does not support {verb} {} yet",
                    o.names.join(" / ")
                )));
            }
            args.push(name);
            if o.value.is_some() {
                args.push(v);
            }
        }
    }
    Ok(Invocation::Run(Parsed {
        host,
        port,
        verb: verb.to_string(),
        args,
        positional,
    }))
}

fn usage_error(e: &clap::Error, tokens: &[String], specs: &[VerbSpec]) -> UsageError {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let ctx = |k| match e.get(k) {
        Some(ContextValue::String(s)) => s.clone(),
        Some(ContextValue::Strings(v)) => v.join(", "),
        _ => String::new(),
    };
    match e.kind() {
        ErrorKind::InvalidSubcommand | ErrorKind::UnknownArgument => {
            // Cassandra lists everything from the first token it cannot place
            let bad = ctx(ContextKind::InvalidSubcommand) + &ctx(ContextKind::InvalidArg);
            let from = tokens.iter().position(|t| *t == bad).unwrap_or(0);
            UsageError(format!(
                "Found unexpected parameters: [{}]",
                tokens[from..].join(", ")
            ))
        }
        ErrorKind::MissingSubcommand => UsageError("No command specified".into()),
        ErrorKind::InvalidValue | ErrorKind::WrongNumberOfValues | ErrorKind::TooFewValues => {
            let arg = ctx(ContextKind::InvalidArg);
            let value = specs
                .iter()
                .flat_map(|s| s.options.iter())
                .find(|o| arg.contains(&format!("--{}", o.id())))
                .and_then(|o| o.value.clone())
                .unwrap_or(arg);
            UsageError(format!("Required values for option '{value}' not provided"))
        }
        _ => UsageError(e.to_string().trim().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Invocation, UsageError> {
        let t: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        parse(&t)
    }

    fn run(s: &str) -> Parsed {
        match p(s) {
            Ok(Invocation::Run(r)) => r,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn every_help_text_is_read() {
        for v in verbs() {
            assert!(!v.about.is_empty(), "{}", v.name);
            assert!(
                v.options.iter().filter(|o| is_global(o)).count() == 6,
                "{}: the six global options",
                v.name
            );
        }
        let repair = verbs().into_iter().find(|v| v.name == "repair").unwrap();
        let pr = repair
            .options
            .iter()
            .find(|o| o.canonical() == "--partitioner-range")
            .unwrap();
        assert_eq!(pr.names, vec!["-pr", "--partitioner-range"]);
        assert_eq!(repair.args.as_deref(), Some("[<keyspace> <tables>...]"));
        assert_eq!(repair.arity(), (0, None));
        let arity = |n: &str| verbs().into_iter().find(|v| v.name == n).unwrap().arity();
        assert_eq!(arity("assassinate"), (1, Some(1)));
        assert_eq!(arity("getendpoints"), (3, Some(3)));
        assert_eq!(arity("removenode"), (1, Some(1)));
        assert_eq!(arity("status"), (0, Some(1)));
        assert_eq!(arity("tablehistograms"), (0, Some(2)));
        assert_eq!(arity("truncatehints"), (0, None));
        assert_eq!(arity("drain"), (0, Some(0)));
        // the SYNOPSIS says whether they are optional
        assert_eq!(arity("ring"), (0, Some(1)));
        assert_eq!(arity("compact"), (0, None));
        assert_eq!(arity("setstreamthroughput"), (1, Some(1)));
        assert_eq!(arity("setlogginglevel"), (0, Some(2)));
        // an about that wraps in the NAME section is read whole
        let set = verbs()
            .into_iter()
            .find(|v| v.name == "setlogginglevel")
            .unwrap();
        assert!(
            set.about
                .starts_with("Set the log level threshold for a given component or class."),
            "{}",
            set.about
        );
        // every unsupported option is one the help lists
        for (verb, opt) in UNSUPPORTED {
            let v = verbs().into_iter().find(|v| v.name == *verb).unwrap();
            assert!(
                v.options.iter().any(|o| o.canonical() == *opt),
                "{verb} {opt}"
            );
        }
    }

    #[test]
    fn cassandras_option_forms_are_taken() {
        let r = run("-h 127.0.0.2 -p 7200 repair -pr -st 5 --end-token 9 -full ks t1 t2");
        assert_eq!((r.host.as_str(), r.port), ("127.0.0.2", 7200));
        assert_eq!(r.verb, "repair");
        assert_eq!(
            r.args,
            vec![
                "ks",
                "t1",
                "t2",
                "--end-token",
                "9",
                "--full",
                "--partitioner-range",
                "--start-token",
                "5"
            ]
        );
        assert_eq!(r.option("--start-token"), Some("5"));
        // global options after the verb, and the password options taken
        let r = run("status ks -h 10.0.0.1 -pw secret -u cassandra -pp");
        assert_eq!(
            (r.host.as_str(), r.args.clone()),
            ("10.0.0.1", vec!["ks".to_string()])
        );
        let r = run("snapshot -t my-tag ks1 ks2");
        assert_eq!(r.args, vec!["ks1", "ks2", "--tag", "my-tag"]);
        let r = run("clearsnapshot --all");
        assert_eq!(r.args, vec!["--all"]);
        let r = run("tablestats -F json ks.t");
        assert_eq!(r.option("--format"), Some("json"));
        assert_eq!(r.positional, vec!["ks.t"]);
        // `--` ends the options: a keyspace may look like one
        let r = run("flush -- -weird");
        assert_eq!(r.args, vec!["-weird"]);
        // the names older releases used
        assert_eq!(run("cfstats ks").verb, "tablestats");
    }

    #[test]
    fn mistakes_get_cassandras_words() {
        let e = |s: &str| match p(s) {
            Err(e) => e.0,
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(e("nosuchverb"), "Found unexpected parameters: [nosuchverb]");
        assert_eq!(
            e("tablestats -F"),
            "Required values for option 'format' not provided"
        );
        assert_eq!(
            e("assassinate"),
            "Required parameters are missing: ip address"
        );
        assert_eq!(e("drain now"), "Found unexpected parameters: [now]");
        assert_eq!(
            e("status --bogus"),
            "Found unexpected parameters: [--bogus]"
        );
        assert_eq!(
            e("repair --trace"),
            "Sibyl does not support repair -tr / --trace yet"
        );
        assert!(e("-p notaport status").contains("port"));
        assert_eq!(
            UsageError("x".into()).to_string(),
            "nodetool: x\nSee 'nodetool help' or 'nodetool help <command>'."
        );
    }

    #[test]
    fn help_is_cassandras() {
        let Ok(Invocation::Help(h)) = p("help statusbinary") else {
            panic!()
        };
        assert_eq!(h, include_str!("nodetool_help/statusbinary.txt"));
        assert!(h.starts_with("NAME\n        nodetool statusbinary - Status of native transport"));
        let Ok(Invocation::Help(h)) = p("repair --help") else {
            panic!()
        };
        assert!(h.contains("-pr, --partitioner-range"));
        let Ok(Invocation::Help(h)) = p("help") else {
            panic!()
        };
        assert!(h.contains("\n    repair                              Repair one or more tables\n"));
        let Ok(Invocation::Help(h)) = p("-p 7200 -h localhost help status") else {
            panic!()
        };
        assert!(h.starts_with("NAME\n        nodetool status - "));
        let Ok(Invocation::Help(h)) = p("help nosuch") else {
            panic!()
        };
        assert_eq!(h, "Unknown command nosuch\n\n");
    }
}
