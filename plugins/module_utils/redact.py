# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secret redaction shared by the controller (planner) and the hosts (evidence module).

Runs on targets, so: standard library only and Python 3.8 compatible syntax.
Every secret is replaced by ``[REDACTED:<kind>]`` so a reader (or an LLM) still sees
that something was there and what it was. The rules are ordered: multi-line blocks
first, then structured forms (URLs, headers, connection strings, client command lines),
then free-standing tokens with a recognisable shape, then ``key=value`` pairs and values
next to a secret-like key. A value is left alone when it cannot be a secret: a number
(``token_ttl: 3600``), a yes/no word (``(using password: YES)``), a path
(``password_file: /run/secrets/db_password``) or an empty or already redacted value.
"""
from __future__ import absolute_import, division, print_function

import base64
import math
import re

__metaclass__ = type

MARK = "[REDACTED:%s]"

# Names whose value is a secret, inside a longer key too (MYSQL_PASSWORD, client_secret).
_SECRET_WORDS = (
    r"passw|passphrase|passcode|kennwort|mot[_.-]?de[_.-]?passe|contrase(?:n|\u00f1)a|wachtwoord|senha"
    r"|pwd|secret|token|authtok|api[_.-]?key|apikey|access[_.-]?key|accountkey"
    r"|shared[_.-]?(?:access[_.-]?)?key|pre[_.-]?shared|(?<!\.)community(?![a-z.])"
    r"|auth[_.-]?key|private[_.-]?key|key[_.-]?data|credentials?|_pass|psk(?![a-z])"
    r"|(?<![a-z])auth(?![a-z])|(?<![a-z])sig(?![a-z])"
    r"|identitytoken|webhook[_.-]?url|client[_.-]?key|signing[_.-]?key|encryption[_.-]?key|session[_.-]?key"
    r"|pw(?![a-z])|(?<![a-z])pass(?![a-z])|(?<=(?-i:[a-z]))(?-i:P)ass(?![a-z])|(?<![a-z])pin(?![a-z])"
    r"|(?<=[a-z])(?<!by)(?<!com)(?<!sur)(?<!tres)(?<!over)(?<!under)(?<!no)pass(?![a-z])"
    r"|(?<=[a-z])(?<!o)(?<!pre)(?<!non)(?<!no)auth(?![a-z])"
    r"|signature|sess(?:ion)?[_.-]?id|(?<![a-z])sid(?![a-z])"
    r"|csrf|xsrf|cookie"
)
# A camelCase `Pass` (authPass, privPass) is a word of its own, and so is a lowercase compound
# that ends the name (requirepass, rootpass, masterauth, rpcauth); `bypass`, `compass`, `oauth` are not.
_SECRET_KEY = r"[A-Za-z0-9_.-]*?(?:" + _SECRET_WORDS + r")[A-Za-z0-9_.-]*"
_SECRET_KEY_RE = re.compile(r"^" + _SECRET_KEY + r"$", re.IGNORECASE)
# Keys that match the pattern above but never hold a secret themselves.
_NOT_SECRET_KEYS = frozenset(("token_count", "tokens", "prompt_tokens", "completion_tokens", "max_tokens",
                              "total_tokens", "auth_basic", "authorized_keys", "author", "authority",
                              "passwordauthentication", "pubkeyauthentication", "kbdinteractiveauthentication",
                              "challengeresponseauthentication", "auth_method", "authentication", "auth_type",
                              "signal", "signature", "design", "assign", "sighup", "sigterm", "passwd.db",
                              "set-cookie", "cookie", "cookies"))
# Suffixes that make a secret-like key name something about the secret, not the secret.
_ABOUT_SECRET = re.compile(r"(?:_|-|\b)(?:file|path|dir|ttl|length|len|min|max|count|timeout|expiry|expires|"
                           r"age|policy|required|enabled|type|mode|method|hint|format|encoding|algorithm|"
                           r"lifetime|size|url_path|id|name|user|username|header|prefix|rounds|cost|encryption|"
                           r"hashing|scheme|backend|provider|plugin|store|strength|complexity|quality|reset|"
                           r"change|changed|prompt|check|checks|level)$",
                           re.IGNORECASE)
# Key names that are also ordinary words (or name things that are only sometimes secret):
# their value must look like a credential (random-looking, or a quoted phrase).
_WEAK_KEYS = frozenset(("auth", "sig", "pwd", "pass", "pin", "sid", "signature"))
_WEAK_KEY_RE = re.compile(r"(?:^|[_.-])(?:signature|sig|sid|pin)$", re.IGNORECASE)
# Key names that hold a password or passphrase: even a number is one (`password: 123456`),
# and an unquoted value runs to the end of the line when nothing else follows on it.
_PASSWORD_KEY_RE = re.compile(r"pass(?:word|wd|phrase)?(?![a-z])|pwd$|pw$|secret$|(?:^|[_.-])pin$", re.IGNORECASE)
_HARMLESS_VALUE = re.compile(r"^(?:yes|no|true|false|on|off|none|null|nil|n/a|empty|unset|required|optional|"
                             r"disabled|enabled|\*+|x+|-+|[|>][+-]?[0-9]?|\[redacted[^\]]*\]|<[^>]*>|\$\{[^}]*\}|%\([^)]*\)s|"
                             r"[0-9]{1,12}(?:\.[0-9]+)?[smhdwy]?|/[^\s]*)$", re.IGNORECASE)


def _entropy(text):
    counts = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    size = float(len(text))
    return -sum(n / size * math.log(n / size, 2) for n in counts.values())


def _looks_random(value):
    """A token-shaped value: long, several character classes, high entropy."""
    if len(value) < 16:
        return False
    classes = sum(1 for pattern in ("[a-z]", "[A-Z]", "[0-9]", r"[+/_=.-]") if re.search(pattern, value))
    return classes >= 2 and _entropy(value) >= 3.3


def _harmless(value):
    """A value that cannot be a secret. A path is one, unless it is base64 that happens to start
    with `/` (a padded run, or a segment shaped like a token)."""
    if not _HARMLESS_VALUE.match(value):
        return False
    if value.startswith("/") and (value.rstrip(";,").endswith("=")
                                  or any(_looks_random(part) for part in value.split("/"))):
        return False
    return True


def _credential_shaped(value):
    """A value that reads as a credential when nothing but its place says so (the token after a
    secret word in the middle of a directive): six characters or more mixing letters with digits,
    capitals or symbols, and not an identifier (pam_unix.so, sha512), a path, a socket or URL
    (anything with `:/`), an option list (`[a=1`) or a reference (`$x`, `%s`)."""
    value = value.rstrip(";,")
    if len(value) < 6 or value[:1] in "[({<$%\\" or ":/" in value or "=" in value.rstrip("="):
        return False
    if value.startswith("/") and not any(_looks_random(part) for part in value.split("/")):
        return False
    if re.match(r"^(?=[^.:]*[.:])[0-9A-Fa-f.:]+(?:/[0-9]{1,3})?$", value):
        return False  # an address or a network (10.0.0.0/8, fd00::1), not a credential
    if re.match(r"^(?:[a-z]+[0-9]{0,4}|[.@]?[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)+|[0-9]+|[a-z]+(?:,[a-z]+)+)$", value):
        return False
    classes = sum(1 for pattern in ("[a-z]", "[A-Z]", "[0-9]", r"[^A-Za-z0-9]") if re.search(pattern, value))
    return classes >= 2


# Programs that read a password from their standard input when run so.
_STDIN_READERS = (r"(?:sudo\b[^\n|;&]*?[ \t]-[a-zA-Z]*S\b|chpasswd\b|passwd\b[^\n|;&]*?--stdin\b|[a-z0-9_.-]+\b[^\n|;&]*?"
                  r"--password-stdin\b|htpasswd\b[^\n|;&]*?[ \t]-[a-zA-Z]*i|smbpasswd\b[^\n|;&]*?[ \t]-[a-zA-Z]*s|kinit\b"
                  r"|cryptsetup\b|vncpasswd\b|openssl\b[^\n|;&]*?(?:stdin|fd:0))")

_RULES = (
    # PEM private keys (RSA, EC, OPENSSH, ENCRYPTED...), also when cut off before END.
    ("private_key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)", re.DOTALL),
     lambda m, kind: MARK % kind),
    # Any other armored block whose label names a key (OpenVPN static keys, shared and symmetric
    # keys), unless the label says the key is public.
    ("private_key", re.compile(
        r"(?i)-----BEGIN (?![A-Z0-9 _-]*PUBLIC)[A-Z0-9 _-]*?\bKEY\b[A-Z0-9 _-]*?-----.*?"
        r"(?:-----END [A-Z0-9 _-]*?-----|\Z)", re.DOTALL),
     lambda m, kind: MARK % kind),
    # A multi-line element named like a secret (OpenVPN's inline <tls-auth>, <secret>): its body.
    ("secret", re.compile(r"(?m)^(?P<open>[ \t]*<(?P<tag>[A-Za-z][A-Za-z0-9_.-]{0,60})>[ \t]*\n)"
                          r"(?P<body>(?:(?![ \t]*</(?P=tag)>).*\n){1,200}?)(?P<close>[ \t]*</(?P=tag)>)"),
     "block_element"),
    # Slack incoming webhooks: the path is the credential.
    ("webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}"),
     lambda m, kind: MARK % kind),
    # Any other webhook URL (Discord, Teams, chat and CI services): the path after /hooks/ or
    # /webhooks/ is the credential when it holds a random-looking segment.
    ("webhook", re.compile(r"(?i)(\bhttps?://[^\s/]+/(?:[^\s/]+/)*?(?:web)?hooks?/)([^\s\"'<>]+)"),
     "capability"),
    # Telegram bot tokens, bare or in API URLs.
    ("telegram_token", re.compile(r"(?<![A-Za-z0-9])(?:bot)?[0-9]{6,12}:AA[A-Za-z0-9_-]{30,40}(?![A-Za-z0-9_-])"),
     lambda m, kind: MARK % kind),
    # scheme://user:password@host -> scheme://[REDACTED]@host
    ("url_credentials", re.compile(
        r"\b([A-Za-z][A-Za-z0-9+.-]{1,20}://)[^\s:/@'\"]*:[^\s@/'\"]*@"),
     lambda m, kind: m.group(1) + MARK % kind + "@"),
    # An option named for the key it takes (`--license-key X`, `-license_key=X`, `--key X`,
    # `-encrypt X`): a value shaped like a credential, not a path, a file name or a word.
    ("api_key", re.compile(r"(?P<head>(?<![\w-])--?(?P<name>(?:[A-Za-z0-9]+[_-])*(?:key|encrypt))(?:[ \t]+|=))"
                           r"(?P<value>(?!-)[^\s\"'<>]+)", re.IGNORECASE), "key_option"),
    # A label of several words whose last one names a credential, numbered or with a shown
    # default (`Unseal Key 1:`, `License Key:`, `AWS Secret Access Key [None]:`).
    ("secret", re.compile(r"(?im)(?P<head>(?<![\w.-])(?P<words>(?:[A-Za-z][A-Za-z0-9-]*[ \t]+){1,5}?)"
                          r"(?P<noun>key|token|secret|password|passphrase|passcode)(?:[ \t]+[0-9]{1,2}|[ \t]*\[[^\]\n]{0,20}\])?"
                          r"[ \t]*[:=][ \t]*)(?P<value>[^\s\"'<>]+)"), "labelled_credential"),
    # A sentence that says a password or one-time code follows (`A temporary password is generated
    # for root@localhost: X`, `The generated password for the elastic user is : X`).
    ("password", re.compile(r"(?i)(?P<head>\b(?P<noun>password|passphrase|passcode|one[- ]time[ \t]+(?:password|code))\b"
                            r"(?:[^\n:=\"'\[\]]{0,80}?:|[^\n:=\"'\[\]]{0,80}?\bis\b)[ \t]*)(?P<value>[^\s\"'<>\[]+)"),
     "announced_credential"),
    # A URL's query string (in a URL, a request line, a referer): parameters that authenticate
    # the request by web convention, whatever words the key=value rules know.
    ("query_credential", re.compile(r"(?P<url>(?:\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s?\"'<>]*|(?<![^\s\"'(=\\])"
                                    r"/[^\s?\"'<>]*)\?)(?P<query>[^\s\"'<>#]+)"), "query_credential"),
    # Authorization / Proxy-Authorization headers, whatever the scheme.
    ("authorization", re.compile(
        r"\b((?:proxy-)?authorization[ \t]*[:=][ \t]*)(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;\"'][^\n\r,;\"']*)",
        re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    ("bearer", re.compile(r"\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
     lambda m, kind: MARK % kind),
    ("api_key", re.compile(
        r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"
        r"|(?:AKIA|ASIA|AROA|AIDA)[0-9A-Z]{16}"
        r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
        r"|glpat-[A-Za-z0-9_-]{20,}|gl(?:rt|dt|ptt|cbt|imt)-[A-Za-z0-9_-]{20,}"
        r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{20,}"
        r"|AIza[0-9A-Za-z_-]{35}"
        r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{16,}"
        r"|hv[sbr]\.[A-Za-z0-9_-]{20,}"
        r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"
        r"|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,}"
        r"|dop_v1_[a-f0-9]{40,}|shpat_[a-fA-F0-9]{32})"),
     lambda m, kind: MARK % kind),
    # crypt(3) and htpasswd hashes: $6$..., $apr1$..., bcrypt $2y$..., {SHA}/{SSHA}.
    ("password_hash", re.compile(r"\$(?:1|2[aby]?|5|6|7|y|gy|apr1|argon2(?:id|i|d))\$[./A-Za-z0-9$=,+]{8,}"),
     lambda m, kind: MARK % kind),
    # Database password hashes as the servers print them: PostgreSQL's SCRAM and md5 + hex, MySQL's
    # native `*` + 40 hex and caching_sha2 `$A$005$...`.
    ("password_hash", re.compile(r"SCRAM-SHA-(?:1|256|512)\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+"
                                 r"|(?<![A-Za-z0-9])md5[0-9a-f]{32}(?![A-Za-z0-9])"
                                 r"|(?<![A-Za-z0-9*])\*[0-9A-F]{40}(?![A-Za-z0-9])"
                                 r"|\$A\$[0-9]{3}\$[^\s|]{20,}"),
     lambda m, kind: MARK % kind),
    ("password_hash", re.compile(r"\{(?:SHA|SSHA|SHA256|SSHA256|SHA512|SSHA512|SMD5|MD5|CRYPT|PBKDF2[-A-Z0-9]*|"
                                 r"ARGON2)\}[A-Za-z0-9+/=$.]{8,}", re.IGNORECASE),
     lambda m, kind: MARK % kind),
    # A password in clear behind its scheme (Dovecot's and LDAP's `{PLAIN}pw`, `{CLEARTEXT}pw`,
    # `{PLAIN-TRUNC}`), and any other `{SCHEME}` value where a password stands (`alice:{X}...`, `: {X}...`).
    ("password", re.compile(r"\{(?:PLAIN(?:-TRUNC)?|CLEAR(?:TEXT)?)\}[^\s:]+", re.IGNORECASE),
     lambda m, kind: MARK % kind),
    ("password_hash", re.compile(r"(?:(?<=[A-Za-z0-9_.@-]:)|(?<=[:=][ \t])|(?<=^))\{[A-Z][A-Z0-9.-]{1,24}\}[^\s:]{4,}", re.MULTILINE),
     lambda m, kind: MARK % kind),
    # Redis: requirepass / masterauth in config files, CLI flags and CONFIG SET.
    ("requirepass", re.compile(
        r"\b((?:--)?(?:requirepass|masterauth)[ \t]+)(?!(?:is|was|not|must|should|has|set|unset)\b)"
        r"(?:\"[^\"\n]*\"|'[^'\n]*'|\S+)",
        re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    # Redis ACL rules (users.acl, ACL LIST, ACL SETUSER): `>pw` and `<pw` carry a password in
    # clear, `#hex` and `!hex` its SHA-256; the user name and the permissions stay readable.
    ("password", re.compile(r"(?i)\b(?:user|setuser)[ \t]+\S+[ \t]+(?:on|off|reset)\b[^\n]*"),
     lambda m, kind: re.sub(r"(?<=[ \t])([<>])(?!\[REDACTED)\S+|(?<=[ \t])([#!])[0-9A-Fa-f]{64}(?![0-9A-Za-z])",
                            lambda t: (t.group(1) or t.group(2)) + MARK % kind, m.group(0))),
    # Redis AUTH [user] password, as typed, logged or shown by MONITOR ("AUTH" "user" "pw").
    ("password", re.compile(r"((?:\bAUTH|\"auth\"|\"AUTH\")\s+(?:\"?[A-Za-z0-9_.@-]+\"?\s+)?)"
                            r"(?!(?:required|failed|failure|ok|error|errors|succeeded|successful|timeout|disabled|enabled)\b)"
                            r"(\"?)([^\s\"]+)\2(?=[ \t]*(?:\n|$))"),
     lambda m, kind: m.group(1) + m.group(2) + MARK % kind + m.group(2)),
    ("password", re.compile(r"(\bredis-cli\b[^\n]*?\s(?:-a|--pass)\s+)(\S+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # Clients whose secret is the value of one short option, joined (`-wSECRET`) or apart, wherever
    # it stands on the line: a key-value store's `-a` (redis-cli, valkey-cli, keydb-cli), a directory's
    # bind `-w` (the ldap* tools; ldappasswd's old `-a` and new `-s` too), SNMP's community `-c` and
    # v3 pass phrases `-A`/`-X` (the snmp* tools), an MQTT client's `-P`, sshpass's `-p`.
    ("password", re.compile(r"(?P<program>\b(?:(?:redis|valkey|keydb)-cli|ldap[a-z]*|snmp[a-z]*|mosquitto_[a-z]+|sshpass"
                            r"|ipmitool|(?:un)?zip(?:cloak)?|7z[ar]?)\b)"
                            r"(?P<rest>[ \t][^\n]*)"),
     "option_secret"),
    # A password given as a positional argument: the last one of a password setter in batch mode
    # (`htpasswd -b FILE USER PASS`, `htpasswd -nb USER PASS`, `mosquitto_passwd -b`, any `*passwd`),
    # of a subcommand that sets or checks one (`rabbitmqctl add_user USER PASS`, `openssl passwd
    # PASS`), and the word after a share (`smbclient //host/share PASS`, `net use X: \\host\share PASS`).
    ("password", re.compile(r"(?P<head>\b[a-z_]*passwd[ \t]+(?:[^\n|;&<>]*?[ \t])?-[a-zA-Z]*b[a-zA-Z]*[ \t]"
                            r"(?:[^\n|;&<>]*?[ \t])?)(?P<value>[^\s|;&<>)]+)(?=[ \t]*(?:$|\n|[|;&<>)]))"
                            r"|(?P<head2>\b(?:add_?user|change_?password|set_?password|authenticate_?user)[ \t]+"
                            r"(?:-\S+[ \t]+)*[^\s-]\S*[ \t]+)(?P<value2>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-]\S*)"
                            r"|(?P<head5>\b[a-z_]*passphrase[ \t]+(?:-\S+[ \t]+)*[^\s-]\S*[ \t]+)(?P<value5>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-]\S*)"
                            r"|(?P<head3>\bopenssl[ \t]+passwd[ \t]+(?:[^\n|;&<>]*?[ \t])?)(?P<value3>[^\s|;&<>)-]\S*)"
                            r"(?=[ \t]*(?:$|\n|[|;&<>)]))"
                            r"|(?P<head4>(?:\bsmb[a-z]*|\brpcclient|\bnet[ \t]+use)\b[^\n]*?[ \t]['\"]?(?://|\\\\)[^\s/\\]+[/\\]\S+[ \t]+)"
                            r"(?P<value4>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'/-]\S*)"),
     "positional_password"),
    # A password handed to a program that reads it from its standard input, as the line shows it:
    # `echo SECRET | sudo -S ...`, `echo USER:SECRET | chpasswd`, `printf SECRET | docker login
    # --password-stdin`, `passwd --stdin`, `htpasswd -i`, `smbpasswd -s`, kinit, cryptsetup,
    # vncpasswd; and the same program given it by a here-string (`<<< SECRET`).
    ("password", re.compile(r"(?P<head>\b(?:echo|printf)(?:[ \t]+-[neE]+)*[ \t]+(?:(?:'[^'\n]*%[^'\n]*'|\"[^\"\n]*%[^\"\n]*\""
                            r"|[^\s'\"]*%[^\s'\"]*)[ \t]+)?)(?P<value>'[^'\n]*'|\"[^\"\n]*\"|[^\s|;&'\"]+)"
                            r"(?=[ \t]*\|[ \t]*(?:\S*/)?" + _STDIN_READERS + r")"
                            r"|(?P<head2>\b" + _STDIN_READERS + r"[^\n|;&]*?<<<[ \t]*)(?P<value2>'[^'\n]*'|\"[^\"\n]*\"|[^\s|;&'\"]+)"),
     "stdin_password"),
    # Oracle's clients take `USER/PASSWORD[@CONNECT]` as their first operand or as `userid=`.
    ("password", re.compile(r"(?P<head>(?:\b(?:sqlplus|expdp|impdp|exp|imp|rman|sqlldr|dgmgrl)\b(?:[ \t]+-\S+)*"
                            r"(?:[ \t]+target)?[ \t]+|\buserid=)['\"]?[A-Za-z0-9_$#]+/)(?P<value>[^\s@/'\"]+)"),
     "after_user"),
    # Network devices' configuration: a secret word, then an encryption type (`0` clear, `7`
    # reversible, `5`/`8`/`9` hashed), an encoding or an algorithm with its key number, then
    # the value (`username U password 0 X`, `enable secret 0 X`, `tacacs-server key X`, `key-string
    # X`, `ip ospf message-digest-key 1 md5 X`, `wpa-psk ascii 0 X`, SNMPv3 users' `auth sha X
    # priv aes 128 X`). The value must look like a credential: log lines say `key file`.
    ("password", re.compile(r"(?m)^[ \t]*[a-z][^\n]*"), "device_secret"),
    # MySQL clients: -pSECRET (joined; a bare -p prompts).
    ("password", re.compile(r"(\b(?:mysql|mysqladmin|mysqldump|mysqlcheck|mysqlimport|mysqlshow|mariadb|"
                            r"mariadb-dump|mariadb-admin)\b[^\n]*?\s-p)([^\s-][^\s]*)"),
     lambda m, kind: m.group(1) + MARK % kind),
    ("password", re.compile(r"(\bsshpass\b[^\n]*?\s-p\s*)(\S+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # Command lines that name a user and then give a password with a short option: `-u NAME ...
    # -p SECRET` (mongo, docker login, az), `-U NAME ... -P SECRET` (sqlcmd), `-D DN ... -w SECRET`
    # (ldapsearch). A number after -p/-P is a port, a plain word the next argument (`mysqladmin -u
    # root -p status` prompts), so the value must look like a credential.
    ("password", re.compile(r"(?P<head>\s(?:-[uUD]|--user(?:name)?)(?:[ \t]+|=)\S+(?:[ \t]+(?!-[pPwW](?:[ \t]|$))\S+)*?"
                            r"[ \t]+-[pPwW][ \t]+)(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-][^\s]*)"),
     "user_then_password"),
    # Single-dash options named for a password (`-storepass`, `-keypass`, `-passphrase`, `-password`).
    ("password", re.compile(r"(?i)(?P<head>(?<![\w-])-[a-z]*(?:pass(?:word|phrase|wd)?|pwd)(?:[ \t]+|=|:))"
                            r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-]\S*)"),
     "dash_password"),
    # OpenSSL's pass phrase arguments: `pass:SECRET` (`env:`, `file:` and `fd:` only name where it is).
    ("password", re.compile(r"(?<![\w:/])(pass:)(?!\[REDACTED)(\S+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # Samba's `-U user%password` and Windows-style `/p:` `/password:` options.
    ("password", re.compile(r"(?i)((?:\s-U[ \t]*|--user=|/user:)[^\s%]+%)(\S+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    ("password", re.compile(r"(?i)((?<=\s)/(?:p|pass|password|pwd):)(\S+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # curl/wget -u user:password (the user stays readable).
    ("password", re.compile(r"(\b(?:curl|wget|lftp|http|https)\b[^\n]*?\s(?:-u|--user|--proxy-user|-U|"
                            r"--http-user)[\s=]*['\"]?[^\s:'\"\[]+:)([^\s'\"]+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # `-u USER,PASSWORD` (lftp and the clients that copy its syntax): the user stays readable.
    ("password", re.compile(r"(\s-u[ \t]+['\"]?[A-Za-z0-9_.@-]+,)(?!\[REDACTED)([^\s'\"]+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # .netrc: machine HOST login USER password SECRET
    ("password", re.compile(r"(\b(?:machine|default)\b[^\n]*?\bpassword\s+)(\S+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # .pgpass: host:port:database:user:password
    ("password", re.compile(r"(?m)(?:^|(?<=[\s:]))((?:[A-Za-z0-9_.*\[\]-]+|\*):(?:[0-9]{1,5}|\*):(?![0-9]+:)[^:\s]+:(?![0-9]+:)[^:\s]+:)(\S+)$"),
     lambda m, kind: m.group(1) + MARK % kind),
    # SQL statements that set a password: the quoted literal after PASSWORD or IDENTIFIED [WITH
    # plugin] BY (CREATE/ALTER ROLE|USER, SET PASSWORD = PASSWORD('...')), as typed in psql -c,
    # mysql -e or logged by the server; '' inside the literal is an escaped quote.
    ("password", re.compile(
        r"(?i)((?<![\"'\w])(?:(?:UN)?ENCRYPTED[ \t]+)?(?:PASSWORD|IDENTIFIED[ \t]+(?:WITH[ \t]+[A-Za-z0-9_]+[ \t]+)?BY"
        r"(?:[ \t]+PASSWORD)?)(?:[ \t]+(?:=[ \t]*)?(?:PASSWORD[ \t]*)?\(?|\()[ \t]*)"
        r"('(?:[^'\\\n]|''|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|\$[A-Za-z0-9_]*\$.*?\$[A-Za-z0-9_]*\$)"),
     lambda m, kind: m.group(1) + "'" + MARK % kind + "'"),
    # An account's stored authentication string as the server prints it back (MariaDB's SHOW
    # GRANTS: IDENTIFIED VIA plugin USING '<hash>'; MySQL's SHOW CREATE USER: IDENTIFIED WITH
    # 'plugin' AS '<hash>'): the quoted literal after USING or AS inside an IDENTIFIED clause.
    ("password", re.compile(
        r"(?i)(\bIDENTIFIED[ \t]+(?:VIA|WITH)[ \t]+['\"`]?[A-Za-z0-9_]+['\"`]?[ \t]+(?:USING|AS)[ \t]+)"
        r"('(?:[^'\n]|'')*'|\"[^\"\n]*\")"),
     lambda m, kind: m.group(1) + "'" + MARK % kind + "'"),
    # Cookie / Set-Cookie headers: every cookie value is a session credential (attributes stay).
    ("cookie", re.compile(r"(?im)^(?P<head>.*?\b(?:set-)?cookie\s*:\s*)(?P<rest>[^\n]*)$"),
     "cookie"),
    # --password value, --password=value, --token value, and any --NAME-password / --NAME-token
    # form (--db-password, --admin_pass), the value quoted or on a continuation line.
    ("password", re.compile(
        r"(--(?:[A-Za-z0-9]+[-_])*(?:password|passwd|passphrase|pass|pw|token|api-key|apikey|secret|"
        r"client-secret|auth-key)(?:[ \t]*\\\n[ \t]*|[ \t]+|=))(?!-)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']\S*)",
        re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    # <password>value</password>: an element named like a secret.
    ("password", re.compile(r"<(?P<tag>[A-Za-z_][A-Za-z0-9_.-]{0,60})>(?P<value>[^<\n]+)</(?P=tag)>"), "element"),
    # A secret given by name and value fields: `key="ApiKey" value="..."`, Kubernetes and Docker
    # environments (`- name: DB_PASS` / `value: ...`, `{"name": "TOKEN", "value": "..."}`).
    ("password", re.compile(
        r"(?P<head>[\"']?\b(?:name|key)[\"']?\s*[:=]\s*[\"']?(?P<name>[A-Za-z0-9_.-]{2,80})[\"']?\s*,?\s*"
        r"(?:\n[ \t]*-?[ \t]*)?[\"']?value[\"']?[ \t]*[:=][ \t]*)(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;}\]\"'/>]+)"),
     "named"),
    # A configuration directive `auth_pass SECRET`, `password SECRET` alone on its line.
    ("password", re.compile(r"(?im)^(?P<key>[ \t]*[A-Za-z0-9_.-]*(?:pass(?:word|wd|phrase)?|secret)[A-Za-z0-9_.-]*[ \t]+(?:\\\n[ \t]*)?)"
                            r"(?P<value>[^\s=:#][^\s]*)[ \t]*$"),
     "directive"),
    # SNMP communities by the column their directive's grammar gives them, whatever they look like:
    # net-snmp's `com2sec[6|unix] [-Cn CONTEXT] NAME SOURCE COMMUNITY` (the last), the notification
    # sinks `trapsink|trap2sink|informsink HOST COMMUNITY [PORT]` (the second), the `*community`
    # directives (`rocommunity6 COMMUNITY`, `authCommunity TYPES COMMUNITY`: the first that is not
    # an option or a list of types) and Cisco's `snmp-server host HOST [traps|informs] [version V
    # [auth|noauth|priv]] COMMUNITY` and `snmp-server community COMMUNITY`.
    ("password", re.compile(r"(?im)^(?P<lead>[ \t]*)(?P<directive>snmp-server[ \t]+(?:host|community)|[a-z0-9]*sink"
                            r"|com2sec[a-z0-9]*|[a-z0-9]+community6?)(?P<rest>(?:[ \t]+[^\s#]+)+)"),
     "snmp_column"),
    # A secret word within the first words of a directive, its value after a space and more
    # words after it (`rocommunity VALUE 10.0.0.0/8`, `user NAME insecure-password VALUE groups
    # G`, `stats auth USER:VALUE`): the value must look like a credential, since log lines and
    # PAM stacks put ordinary words there (`Failed password for`, `password requisite`).
    ("password", re.compile(r"(?m)^(?P<lead>[ \t]*(?:[A-Za-z0-9_.-]+[ \t]+){0,3}?)(?P<name>" + _SECRET_KEY +
                            r")(?P<sep>[ \t]+)(?P<value>[^\s=:#\"'][^\s\"']*)(?=[ \t]|$)", re.IGNORECASE),
     "positional"),
    # A secret word, a name, then the value as the line's last word (Redis Sentinel's `sentinel
    # auth-pass MASTER VALUE`, `auth-pass NAME VALUE` in other daemons): the name is not the secret.
    ("password", re.compile(r"(?m)^(?P<lead>[ \t]*(?:[a-z0-9_.-]+[ \t]+){0,2}?)(?P<name>" + _SECRET_KEY +
                            r")(?P<sep>[ \t]+[A-Za-z0-9_.@][A-Za-z0-9_.@-]*[ \t]+)(?P<value>[^\s=:#\"'-][^\s\"']*)[ \t]*$",
                            re.IGNORECASE),
     "positional_lowercase"),
    # A quoted value right after a word that names a secret (`: PSK "..."` in ipsec.secrets,
    # `password "..."`, `token '...'`, `XAUTH "..."`).
    ("password", re.compile(r"(?P<head>(?<![\w.-])(?P<name>" + _SECRET_KEY + r"|XAUTH|EAP|NTLM)[ \t]+)"
                            r"(?P<value>\"[^\"\n]+\"|'[^'\n]+')", re.IGNORECASE),
     "quoted_after_word"),
    # Key files of time servers (ntp.keys, chrony.keys): `ID TYPE KEY`, the type a digest or a
    # cipher (`M`, `MD5`, `SHA1`, `AES128CMAC`); the key is the secret whatever it looks like.
    ("password", re.compile(r"(?m)^(?P<head>[ \t]*[0-9]{1,5}[ \t]+(?:M|MD5|RMD160|SHA[0-9-]*|AES[0-9]*CMAC|CMAC)[ \t]+"
                            r"(?:HEX:|ASCII:)?)(?P<value>(?!(?:HEX|ASCII):)[^\s#]{4,})[ \t]*(?:#.*)?$"),
     "key_column"),
    # PPP's chap-secrets and pap-secrets: `CLIENT SERVER SECRET ADDRESSES`, a `*` standing for any
    # server or address; quoted or not.
    ("password", re.compile(r"(?m)^(?P<head>[ \t]*\"?[A-Za-z0-9_.@\\-]+\"?[ \t]+(?:\*|\"?[A-Za-z0-9_.-]+\"?)[ \t]+)"
                            r"(?P<value>\"[^\"\n]+\"|[^\s\"#*]+)(?=[ \t]+(?:\*|\"\"|-|[0-9][0-9./]*)[ \t]*$)"),
     "shaped_column"),
    # A line of two quoted columns (PgBouncer's userlist.txt): the name, then its password.
    ("password", re.compile(r"(?m)^(?P<head>[ \t]*\"[A-Za-z0-9_.@-]+\"[ \t]+)(?P<value>\"[^\"\n]+\")[ \t]*$"),
     "shaped_column"),
    # `login=USER:SECRET` (Squid's cache_peer and the options that copy it).
    ("password", re.compile(r"(?i)(\blogin=[^\s:=]+:)(?!\[REDACTED)([^\s]+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # A credential after the name of the algorithm that uses it (SNMPv3 `createUser NAME SHA
    # AUTHPASS AES PRIVPASS`): names are upper case and the value is not a hex digest.
    ("password", re.compile(r"(?P<head>(?<![\w-])(?:MD5|SHA(?:-?(?:1|224|256|384|512))?|DES|3DES|AES(?:-?(?:128|192|256))?)"
                            r"[ \t]+)(?P<value>[^\s\-\"'(][^\s]*)"),
     "after_algorithm"),
    # A two-column credentials map (Postfix sasl_passwd, relay maps): a destination, then
    # `user:secret`. The destination names a host ([host]:port, host.domain, @domain).
    ("password", re.compile(r"(?m)^(?P<head>[ \t]*(?:\[[^\]\s]+\](?::[0-9]{1,5})?|@?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"
                            r"(?::[0-9]{1,5})?)[ \t]+[^\s:]+:)(?P<value>[^\s]+)[ \t]*$"),
     "map_pair"),
    # The same pair percent-encoded once (a form body or a query string inside another URL, a
    # log that escapes it): `password%3DVALUE%26...`.
    ("password", re.compile(r"(?i)(?P<key>\b" + _SECRET_KEY + r")(?P<sep>%3D)(?P<value>[^\s&%]+(?:%(?!26)[0-9A-F]{2}[^\s&%]*)*)"),
     "encoded_pair"),
    # key=value, key: value, "key": "value" (JSON), KEY="value" (env files), AccountKey=...;
    ("password", re.compile(
        r"(?P<key>[\"']?\b" + _SECRET_KEY + r"[\"']?[ \t]*[:=][ \t]*(?:\\\n[ \t]*)?)"
        r"(?P<value>\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|''|\\.)*'"
        r"|\$'(?:[^'\\\n]|\\.)*'"
        r"|[^\s,;&\"'}\]]+(?P<tail>(?:[ \t]+[^\s=:,;&\"'{}\[\]()]+)+[ \t]*(?=\n|$))?)",
        re.IGNORECASE),
     None),
    # A token-shaped value right after a secret-like word (`secret_key abc...`, `token 7f3a...`).
    ("secret", re.compile(r"(?P<key>\b" + _SECRET_KEY + r"[ \t]+)(?P<value>[A-Za-z0-9+/_.=-]{16,})", re.IGNORECASE),
     "entropy"),
)


# Tokens of many services share one shape: a short lowercase or mixed prefix, a separator and a
# long random body (hf_..., ya29...., glsa_..., sq0atp-...). The body must look random.
_PREFIXED_TOKEN = re.compile(r"(?<![A-Za-z0-9_./+=-])(?P<prefix>[A-Za-z]{2,8}[0-9]{0,2}[._-](?:[A-Za-z0-9]{1,6}[._-]){0,2})"
                             r"(?P<body>[A-Za-z0-9_-]{20,})(?![A-Za-z0-9])")
# A run of base64 long enough to hold a key.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/=])")


def _private_key_bytes(run):
    """Does this base64 start a private key? An OpenSSH key ("openssh-key-v1"), or DER whose
    first element is a version number (PKCS#1 RSA, PKCS#8, SEC1 EC keys; certificates and
    public keys start with a sequence instead)."""
    try:
        head = base64.b64decode(run[:24])
    except (ValueError, TypeError):
        return False
    if head.startswith(b"openssh-key-v1"):
        return True
    if len(head) < 8 or head[0] != 0x30:
        return False
    size = head[1]
    at = 2 + (size & 0x7F if size & 0x80 else 0)
    version = head[at:at + 3]
    follow = head[at + 3:at + 4]
    return version in (b"\x02\x01\x00", b"\x02\x01\x01") and follow in (b"\x02", b"\x30", b"\x04")


def _redact_key_bodies(text):
    """Base64 of a private key without its BEGIN line (a log cut it off, a JSON field holds it):
    the run that starts the key and the base64 runs on the lines after it."""
    if len(text) < 40:
        return text
    lines = text.split("\n")
    inside = False
    changed = False
    for index, line in enumerate(lines):
        runs = _BASE64_RUN.findall(line)
        if not runs:
            inside = False
            continue
        if not inside and not any(_private_key_bytes(run) for run in runs):
            continue
        start = next((i for i, run in enumerate(runs) if _private_key_bytes(run)), 0) if not inside else 0
        for run in runs[start:]:
            line = line.replace(run, MARK % "private_key", 1)
        lines[index] = line
        inside = changed = True
    return "\n".join(lines) if changed else text


# A header that announces how many of the following lines are private material: PuTTY's
# `Private-Lines: 14` (the key body), and any `...Private...-Lines: N` of the same shape.
_PRIVATE_LINES = re.compile(r"(?im)^(?P<head>[A-Za-z-]*private[A-Za-z-]*-lines[ \t]*:[ \t]*)(?P<count>[0-9]{1,4})[ \t]*$")
_PRIVATE_TRAILER = re.compile(r"(?im)^(?P<head>private-(?:mac|hash)[ \t]*:[ \t]*)(?P<value>\S+)")


def _redact_announced_lines(text):
    """Redact the N lines a ``Private-Lines: N`` header announces, and the MAC after them."""
    if "-lines" not in text.lower():
        return text
    lines = text.split("\n")
    index = 0
    changed = False
    while index < len(lines):
        found = _PRIVATE_LINES.match(lines[index])
        index += 1
        if not found:
            continue
        for at in range(index, min(index + int(found.group("count")), len(lines))):
            if lines[at].strip() and not lines[at].startswith("[REDACTED:"):
                lines[at] = MARK % "private_key"
                changed = True
    text = "\n".join(lines) if changed else text
    return _PRIVATE_TRAILER.sub(lambda m: m.group("head") + MARK % "private_key", text)


# A secret-named key whose value is not on its own line: a YAML block scalar (`password: >`,
# `password: |-`) or a plain value on the more-indented lines below (`password:` + `  s3cret`).
# The block ends at the first line indented no deeper than the key.
_BLOCK_KEY = re.compile(r"^(?P<indent>[ \t]*)(?:- )?[\"']?(?P<name>[A-Za-z0-9_.-]+)[\"']?[ \t]*:"
                        r"(?P<indicator>[ \t]*(?:[|>][+-]?[0-9]?)?)[ \t]*(?:#.*)?$")
_NESTED = re.compile(r"^[ \t]*(?:- |[\"']?[A-Za-z0-9_.-]+[\"']?[ \t]*:(?:[ \t]|$))")


# A column's type in a table that describes columns (`| password | varchar(255) | YES |`).
_COLUMN_TYPE = re.compile(r"^[a-z]+(?: [a-z]+)*(?:\([0-9, ]+\))?(?: unsigned)?$")


def _redact_table_cells(text):
    """Client tables (psql, mysql, psql's expanded records): a cell that names a secret, the cell
    after it on the same row is its value."""
    if "|" not in text:
        return text
    lines = text.split("\n")
    changed = False
    for index, line in enumerate(lines):
        if line.count("|") < 1 or "[REDACTED:" in line and line.count("|") < 2:
            continue
        cells = line.split("|")
        for at in range(len(cells) - 1):
            name = cells[at].strip()
            value = cells[at + 1].strip()
            if not name or not value or not is_secret_key(name) or _harmless(value) or value.startswith("[REDACTED:") \
                    or _COLUMN_TYPE.match(value):
                continue
            pad = cells[at + 1][:len(cells[at + 1]) - len(cells[at + 1].lstrip())]
            tail = cells[at + 1][len(cells[at + 1].rstrip()):]
            cells[at + 1] = pad + MARK % _kind_for_key(name) + tail
            changed = True
        lines[index] = "|".join(cells)
    return "\n".join(lines) if changed else text


# A key alone on its line and its value alone on the next: redis-cli's replies (`1) "requirepass"`
# then `2) "..."`, or the raw form without numbers and quotes).
_REPLY_PAIR = re.compile(r"(?m)^(?P<head>(?P<num>[0-9]{1,4}\) )?\"?(?P<name>[A-Za-z0-9_.-]{2,64})\"?[ \t]*\n"
                         r"(?(num)[0-9]{1,4}\) ))(?P<quote>\"?)(?P<value>[^\s\"]+)(?P=quote)[ \t]*$")


def _reply_pair_replace(match):
    name = match.group("name")
    value = match.group("value")
    if not is_secret_key(name) or _harmless(value) or value.startswith("[REDACTED:"):
        return match.group(0)
    start = match.start("value") - match.start(0)
    text = match.group(0)
    return text[:start] + MARK % _kind_for_key(name) + text[start + len(value):]


def _redact_block_values(text):
    """The value lines below a secret-named key that has none on its own line."""
    if ":" not in text:
        return text
    lines = text.split("\n")
    changed = False
    index = 0
    while index < len(lines):
        found = _BLOCK_KEY.match(lines[index])
        index += 1
        if not found or not is_secret_key(found.group("name")):
            continue
        indent = len(found.group("indent").expandtabs())
        end = index
        while end < len(lines) and (not lines[end].strip()
                                    or len(lines[end]) - len(lines[end].lstrip()) > indent):
            end += 1
        body = [at for at in range(index, end) if lines[at].strip()]
        if not body or lines[body[0]].strip().startswith("[REDACTED:"):
            continue
        if not found.group("indicator").strip() and _NESTED.match(lines[body[0]]):
            continue  # a nested mapping or list under the key, not its value
        pad = lines[body[0]][:len(lines[body[0]]) - len(lines[body[0]].lstrip())]
        lines[body[0]] = pad + MARK % _kind_for_key(found.group("name"))
        for at in body[1:]:
            lines[at] = None
        changed = True
        index = end
    return "\n".join(line for line in lines if line is not None) if changed else text


# Base64 that decodes to `user:password` (a registry or HTTP basic auth blob) or to a JSON
# document holding credentials (a base64 `.dockerconfigjson`), wherever it stands.
_BASE64_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])(?P<run>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=_-])")
_USER_PASSWORD = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}:[\x21-\x7e]{3,200}$")


def _decoded_credential(run):
    if len(run) % 4 or len(run) > 8192:
        return False
    try:
        raw = base64.b64decode(run)
        decoded = raw.decode("utf-8")
    except (ValueError, TypeError, UnicodeDecodeError):
        return False
    if _USER_PASSWORD.match(decoded):
        return True
    return decoded.lstrip().startswith("{") and re.search(r"\"(?:auth|password|identitytoken)\"", decoded) is not None


def _base64_credential_replace(match):
    run = match.group("run")
    if not _decoded_credential(run):
        return match.group(0)
    return MARK % "credentials"


def _prefixed_replace(match):
    body = match.group("body")
    classes = sum(1 for pattern in ("[a-z]", "[A-Z]", "[0-9]") if re.search(pattern, body))
    if classes < 3 or _entropy(body) < 3.5:
        return match.group(0)
    return MARK % "token"


def _capability_replace(match):
    rest = match.group(2)
    if any(len(part) >= 20 and _looks_random(part) for part in re.split(r"[/?&=]", rest)):
        return match.group(1) + MARK % "webhook"
    return match.group(0)


def _element_replace(match):
    name = match.group("tag")
    value = match.group("value").strip()
    if not is_secret_key(name) or not value or _harmless(value) or value.startswith("[REDACTED:"):
        return match.group(0)
    return "<%s>%s</%s>" % (name, MARK % _kind_for_key(name), name)


def _named_replace(match):
    name = match.group("name")
    value = match.group("value")
    bare = value.strip("\"'")
    if not is_secret_key(name) or not bare or _harmless(bare) or bare.startswith("[REDACTED:"):
        return match.group(0)
    quote = value[0] if value[0] in "\"'" else ""
    return match.group("head") + quote + MARK % _kind_for_key(name) + quote


def _directive_replace(match):
    name = match.group("key").strip().lower()
    value = match.group("value")
    if name in _NOT_SECRET_KEYS or _ABOUT_SECRET.search(name) or _harmless(value.rstrip(";")) \
            or value.startswith("[REDACTED:") or ":/" in value or "$" in value or value == "\\":
        # URLs (proxy_pass http://...) have their own rule, sockets (unix:/...) are places; `$var` is a reference, not a value;
        # a lone `\` continues the line (the value is on the next one, for the option rules).
        return match.group(0)
    return match.group("key") + MARK % _kind_for_key(name)


def _block_element_replace(match):
    if not is_secret_key(match.group("tag")) or match.group("body").strip().startswith("[REDACTED:"):
        return match.group(0)
    pad = re.match(r"[ \t]*", match.group("body")).group(0)
    return match.group("open") + pad + MARK % _kind_for_key(match.group("tag")) + "\n" + match.group("close")


def _positional_replace(match):
    name = match.group("name")
    value = match.group("value")
    if not is_secret_key(name) or "[REDACTED:" in value or _harmless(value.rstrip(";,")):
        return match.group(0)
    user, colon, secret = value.partition(":")
    if colon and re.match(r"^[A-Za-z0-9_.@+-]{1,64}$", user) and _credential_shaped(secret):
        return match.group("lead") + name + match.group("sep") + user + ":" + MARK % _kind_for_key(name)
    if not _credential_shaped(value):
        return match.group(0)
    return match.group("lead") + name + match.group("sep") + MARK % _kind_for_key(name)


def _positional_lowercase_replace(match):
    """As ``_positional_replace``, for directives only (their names are lower case)."""
    if match.group("name") != match.group("name").lower():
        return match.group(0)
    return _positional_replace(match)


def _after_algorithm_replace(match):
    value = match.group("value")
    if re.match(r"^[0-9A-Fa-f:]{16,}$", value) or not _credential_shaped(value):
        return match.group(0)
    return match.group("head") + MARK % "password"


def _encoded_pair_replace(match):
    name = match.group("key")
    if not is_secret_key(name) or _weak(name.lower()) or match.group("value").startswith("[REDACTED"):
        return match.group(0)
    return name + match.group("sep") + MARK % _kind_for_key(name)


def _user_then_password_replace(match):
    value = match.group("value")
    quote = value[0] if value[:1] in "\"'" else ""
    bare = value.strip("\"'")
    if bare.startswith("[REDACTED:") or _harmless(bare) or not (quote and bare or _credential_shaped(bare)):
        return match.group(0)
    return match.group("head") + quote + MARK % "password" + quote


def _dash_password_replace(match):
    value = match.group("value").strip("\"'")
    if value.startswith("[REDACTED:") or _harmless(value) or re.match(r"^(?:env|file|fd):", value):
        return match.group(0)
    return match.group("head") + MARK % "password"


_SNMP_WORDS = frozenset(("traps", "informs", "version", "1", "2c", "3", "auth", "noauth", "priv", "public",
                         "default", "localhost"))


def _snmp_column(directive, words):
    """The index in ``words`` (options included) of the community its directive's grammar names."""
    positions = []
    at = 0
    while at < len(words):
        word = words[at]
        if word.startswith("-"):
            at += 2 if len(word) == 2 or word in ("-Cn", "-V") else 1  # an option and its value
            continue
        positions.append(at)
        at += 1
    if directive.startswith("com2sec"):
        return positions[2] if len(positions) >= 3 else None
    if directive.endswith("sink"):
        return positions[1] if len(positions) >= 2 else None
    if directive.startswith("snmp-server") and directive.endswith("host"):
        rest = positions[1:]
        index = 0
        while index < len(rest) and words[rest[index]].lower() in _SNMP_WORDS:
            if words[rest[index]] == "3" and index and words[rest[index - 1]].lower() == "version":
                return None  # SNMPv3 names a user there; its keys are set elsewhere
            index += 1
        return rest[index] if index < len(rest) else None
    for index in positions:
        if not re.match(r"^[a-z]+(?:,[a-z]+)+$", words[index]):  # authCommunity's TYPES list
            return index
    return None


def _left_as_is(bare):
    """A value a rule of the columns and command lines below leaves alone: empty, already
    marked, a reference (`$VAR`), or a harmless word."""
    return not bare or bare.startswith(("[REDACTED:", "$")) or _harmless(bare)


def _marked(value, kind="password"):
    """The mark that stands for ``value``, inside the quotes ``value`` had."""
    quote = value[0] if value[:1] in "\"'" else ""
    return quote + MARK % kind + quote


def _snmp_column_replace(match):
    directive = re.sub(r"[ \t]+", " ", match.group("directive").lower())
    parts = re.split(r"([ \t]+)", match.group("rest"))
    words = list(parts[2::2])
    column = _snmp_column(directive, words)
    if column is None:
        return match.group(0)
    bare = words[column].strip("\"'")
    if _left_as_is(bare) or bare == "public":
        return match.group(0)
    parts[2 + 2 * column] = MARK % "community"
    return match.group("lead") + match.group("directive") + "".join(parts)


# The short options that carry each client's secret (see the rule): apart or joined, and joined
# only (7-Zip's `-pSECRET`; its bare `-p` asks for one).
_SECRET_OPTIONS = ((re.compile(r"(?:redis|valkey|keydb)-cli$"), "a", ""), (re.compile(r"ldappasswd$"), "wasy", ""),
                   (re.compile(r"ldap[a-z]*$"), "wy", ""), (re.compile(r"snmp[a-z]*$"), "cAX", ""),
                   (re.compile(r"mosquitto_[a-z]+$"), "P", ""), (re.compile(r"sshpass$"), "p", ""),
                   (re.compile(r"ipmitool$"), "P", ""), (re.compile(r"(?:un)?zip(?:cloak)?$"), "P", ""),
                   (re.compile(r"7z[ar]?$"), "", "p"))


def _option_secret_replace(match):
    letters, joined = next((apart, joined) for pattern, apart, joined in _SECRET_OPTIONS
                           if pattern.match(match.group("program")))

    def one(option):
        value = option.group("value")
        bare = value.strip("\"'")
        if _left_as_is(bare) or bare == "public":
            return option.group(0)  # `public` is SNMP's documented default community; `$X` a reference
        return option.group("head") + _marked(value)
    forms = []
    if letters:
        forms.append(r"[ \t]-[" + letters + r"](?:[ \t]+(?=[^\s-])|(?=[^\s]))")
    if joined:
        forms.append(r"[ \t]-[" + joined + r"](?=[^\s])")
    option_re = r"(?P<head>" + "|".join(forms) + r")(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"
    return match.group("program") + re.sub(option_re, one, match.group("rest"))


def _positional_password_replace(match):
    for head, value in (("head", "value"), ("head2", "value2"), ("head3", "value3"), ("head4", "value4"),
                        ("head5", "value5")):
        if match.group(head) is not None:
            text = match.group(value)
            break
    if _left_as_is(text.strip("\"'")):
        return match.group(0)
    return match.group(head) + _marked(text)


def _quoted_after_word_replace(match):
    name = match.group("name")
    value = match.group("value")
    bare = value[1:-1]
    if not (is_secret_key(name) or name.upper() in ("XAUTH", "EAP", "NTLM")) or not bare.strip() \
            or _left_as_is(bare) or "{{" in bare or "{%" in bare \
            or _weak(name.lower()) and not (_looks_random(bare) or len(bare) >= 6):
        return match.group(0)
    return match.group("head") + _marked(value, _kind_for_key(name))


def _key_column_replace(match):
    value = match.group("value")
    if _left_as_is(value.strip("\"'")):
        return match.group(0)
    return match.group("head") + _marked(value)


def _shaped_column_replace(match):
    """A column that holds a password by the file's layout, when nothing else marks it: it must
    look like a credential (layouts like it hold names too)."""
    if not _credential_shaped(match.group("value").strip("\"'")):
        return match.group(0)
    return _key_column_replace(match)


def _stdin_password_replace(match):
    head, value = ("head", "value") if match.group("head") is not None else ("head2", "value2")
    text = match.group(value)
    bare = text.strip("\"'")
    if _left_as_is(bare):
        return match.group(0)
    user, colon, _secret = bare.partition(":")
    if colon and re.match(r"^[A-Za-z0-9_.@-]{1,64}$", user):  # chpasswd's USER:PASSWORD
        quote = text[0] if text[:1] in "\"'" else ""
        return match.group(head) + quote + user + ":" + MARK % "password" + quote
    return match.group(head) + _marked(text)


def _after_user_replace(match):
    value = match.group("value")
    if _left_as_is(value):
        return match.group(0)
    return match.group("head") + MARK % "password"


_DEVICE_SECRET = re.compile(r"(?i)(?P<head>(?<![^ \t])(?:password|secret|key|key-string|[a-z][a-z-]*-key|wpa-psk|psk"
                            r"|auth[ \t]+(?:md5|sha[0-9-]*)|priv[ \t]+(?:des|3des|aes)(?:[ \t]+[0-9]{3})?)"
                            r"(?:[ \t]+[0-9]{1,3}(?=[ \t]))?(?:[ \t]+(?:ascii|hex|md5|sha[0-9-]*|encrypted|unencrypted))?"
                            r"(?:[ \t]+[0-9](?=[ \t]))?[ \t]+)(?P<value>[^\s\"'#;]+)(?=[ \t]|$)")
# The words before it on a device's configuration line: a lowercase keyword first (no `gpg:`, no
# `Good ...`), then no capitalised word of prose.
_DEVICE_LEAD = re.compile(r"^[ \t]*(?:[a-z][a-z0-9_-]*(?:[ \t]+(?![A-Z][a-z]+(?:[ \t]|$))\S+)*[ \t]+)?$")


def _device_secret_replace(match):
    line = match.group(0)

    def one(found):
        value = found.group("value")
        if not _DEVICE_LEAD.match(line[:found.start()]) or _left_as_is(value) or not _credential_shaped(value) \
                or re.match(r"^0x[0-9A-Fa-f]+$", value):
            return found.group(0)
        return found.group("head") + MARK % "password"
    return _DEVICE_SECRET.sub(one, line)


def _map_pair_replace(match):
    if match.group("value").startswith("[REDACTED:") or not _credential_shaped(match.group("value")):
        return match.group(0)
    return match.group("head") + MARK % "password"


# Query parameters that authenticate a request by web convention: an API `key`, an OAuth or
# verification `code`, a CAS `ticket`, a `signature` or `hmac`, a `session`, a one-time `otp`.
# Their name says it in its last part (`access_code`, `X-Amz-Signature`, `session_id`).
_QUERY_CREDENTIAL = re.compile(
    r"^(?:key|code|(?:[a-z0-9]*[_.-])?(?:auth|access|authori[sz]ation|verification|verify|mfa|2fa|otp|login|reset"
    r"|confirm(?:ation)?|activation|invite|magic)[_.-]?code|(?:[a-z0-9]*[_.-])?(?:ticket|signature|sig|hmac|otp|totp)"
    r"|session|sess|sid|session[_.-]?id|sess[_.-]?id)$", re.IGNORECASE)
_QUERY_KIND = (("code", "token"), ("ticket", "token"), ("otp", "token"), ("sig", "signature"), ("hmac", "signature"),
               ("sess", "session"), ("sid", "session"), ("key", "api_key"))


def _query_credential_replace(match):
    """Redact the values of the query parameters `_QUERY_CREDENTIAL` names: a value shaped like a
    credential, or the digits of a one-time code; names, short words, numbers of a bare `code` and
    issue references stay."""
    def one(pair):
        name, sep, value = pair.partition("=")
        if not sep or not _QUERY_CREDENTIAL.match(name) or value.startswith("[REDACTED:"):
            return pair
        # Digits are a one-time code when the name says what for (`otp`, `mfa_code`), not a bare `code=200`.
        one_time = re.match(r"^[0-9]{4,10}$", value) and name.lower() not in ("code", "key", "sid")
        issue = re.match(r"^[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}$", value)  # a ticket system's reference (OPS-1234)
        if issue or not (one_time or _credential_shaped(value)):
            return pair
        kind = next(k for part, k in _QUERY_KIND + (("", "token"),) if part in name.lower())
        return name + sep + MARK % kind
    parts = re.split(r"(&(?:amp;)?|;)", match.group("query"))
    return match.group("url") + "".join(part if i % 2 else one(part) for i, part in enumerate(parts))


# Words before a credential's name that make the label about something public or about the
# credential, not the credential (`Public Key:`, `Host Key:`).
_PUBLIC_LABEL = re.compile(r"(?i)(?:^|[ \t-])(?:public|pub|host|fingerprint|known)(?:$|[ \t-])")


def _labelled_credential_replace(match):
    value = match.group("value").rstrip(".,;)")
    if _PUBLIC_LABEL.search(match.group("words")) or value.startswith("[REDACTED:") or not _credential_shaped(value):
        return match.group(0)
    return match.group("head") + MARK % _kind_for_key(match.group("noun"))


def _announced_credential_replace(match):
    value = match.group("value").rstrip(".,;)")
    one_time = re.search(r"(?i)one[- ]time|passcode", match.group("noun")) and re.match(r"^[0-9]{4,10}[.,]?$", value)
    if value.startswith("[REDACTED:") or not (one_time or _credential_shaped(value)):
        return match.group(0)
    return match.group("head") + MARK % "password"


# Options named for a key that is public or names one (`--public-key`, `--recv-key`, `--gpg-key`).
_PUBLIC_KEY_OPTION = re.compile(r"(?i)(?:^|[_-])(?:public|pub|host|known|recv|gpg|pgp|ssh|trusted)(?:[_-]|$)")


def _key_option_replace(match):
    value = match.group("value")
    if _PUBLIC_KEY_OPTION.search(match.group("name")) or value.startswith("[REDACTED:") \
            or not _credential_shaped(value):
        return match.group(0)
    return match.group("head") + MARK % ("secret" if "encrypt" in match.group("name").lower() else "api_key")


_REPLACERS = {"capability": _capability_replace, "element": _element_replace, "named": _named_replace,
              "directive": _directive_replace, "block_element": _block_element_replace,
              "positional": _positional_replace, "after_algorithm": _after_algorithm_replace,
              "map_pair": _map_pair_replace, "encoded_pair": _encoded_pair_replace,
              "user_then_password": _user_then_password_replace, "dash_password": _dash_password_replace,
              "option_secret": _option_secret_replace, "positional_password": _positional_password_replace,
              "snmp_column": _snmp_column_replace, "stdin_password": _stdin_password_replace,
              "after_user": _after_user_replace, "device_secret": _device_secret_replace,
              "quoted_after_word": _quoted_after_word_replace, "key_column": _key_column_replace,
              "positional_lowercase": _positional_lowercase_replace, "shaped_column": _shaped_column_replace,
              "query_credential": _query_credential_replace, "labelled_credential": _labelled_credential_replace,
              "announced_credential": _announced_credential_replace, "key_option": _key_option_replace}


_COOKIE_ATTRIBUTES = frozenset(("path", "domain", "expires", "max-age", "samesite", "secure", "httponly",
                                "priority", "partitioned", "version", "comment"))


# Cookie names that carry a session or a credential (PHPSESSID, connect.sid, remember_token).
_SESSION_COOKIE = re.compile(r"(?i)sess|sid|auth|token|csrf|xsrf|login|remember|jwt|secret|key|pass|user|ident|"
                             r"(?:^|[_.-])id$|^_?_?(?:host|secure)-")


def _cookie_replace(match):
    """``Cookie: a=1; b=2`` and ``Set-Cookie: id=...; Path=/``: each cookie's value goes,
    the names and the attributes stay (they say what kind of session it was)."""
    def one(pair):
        name, sep, value = pair.partition("=")
        bare = value.strip().strip("\"")
        if not sep or not bare or name.strip().lower() in _COOKIE_ATTRIBUTES \
                or bare.startswith("[REDACTED:"):
            return pair
        if not (_SESSION_COOKIE.search(name) or _looks_random(bare) or len(bare) >= 20):
            return pair  # a preference (lang=en, theme=dark): neither named nor shaped like a credential
        return name + sep + MARK % "cookie"
    return match.group("head") + ";".join(one(pair) for pair in match.group("rest").split(";"))


def _weak(name):
    return name in _WEAK_KEYS or bool(_WEAK_KEY_RE.search(name))


def _kv_replace(match):
    key = match.group("key")
    name = key.strip("\"' \t:=").lower()
    value = match.group("value")
    tail = match.group("tail") or ""
    password_key = bool(_PASSWORD_KEY_RE.search(name))
    if tail and not password_key:
        # Only a password's value runs on to the end of the line; others stop at a space.
        value = value[:len(value) - len(tail)]
        tail_text = tail
    else:
        tail_text = ""
    bare = value.strip("\"'")
    quoted = value[:1] in "\"'" and len(value) > 1
    if name in _NOT_SECRET_KEYS or _ABOUT_SECRET.search(name) or not bare:
        return match.group(0)
    if bare.startswith("[REDACTED:"):
        return match.group(0)
    if _harmless(bare.rstrip(").,]")) and not (
            password_key and not _weak(name) and re.match(r"^[0-9]{4,12}$", bare)):
        return match.group(0)
    if _weak(name) and not (_looks_random(bare) or len(bare) >= 12 and " " not in bare
                            or quoted and len(bare) >= 6):
        return match.group(0)
    kind = _kind_for_key(name)
    quote = value[0] if value[0] in "\"'" else ""
    return key + quote + MARK % kind + quote + tail_text


def _entropy_replace(match):
    name = match.group("key").strip().lower()
    value = match.group("value")
    if name in _NOT_SECRET_KEYS or _ABOUT_SECRET.search(name) or not _looks_random(value) or _harmless(value):
        return match.group(0)
    return match.group("key") + MARK % _kind_for_key(name)


def _kind_for_key(name):
    name = name.lower()
    if "token" in name:
        return "token"
    if "secret" in name:
        return "secret"
    if "signature" in name or name.endswith("sig"):
        return "signature"
    if "key" in name:
        return "api_key"
    if "credential" in name:
        return "credentials"
    return "password"


def redact_text(text):
    """Return ``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``.

    Idempotent: redacting twice gives the same text. Non-string input is converted
    with ``str()`` (``None`` becomes an empty string).
    """
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    elif not isinstance(text, str):
        text = str(text)
    text = _redact_key_bodies(text)
    text = _redact_announced_lines(text)
    text = _redact_block_values(text)
    text = _redact_table_cells(text)
    text = _REPLY_PAIR.sub(_reply_pair_replace, text)
    for kind, pattern, replace in _RULES:
        if replace is None:
            text = pattern.sub(_kv_replace, text)
        elif replace in _REPLACERS:
            text = pattern.sub(_REPLACERS[replace], text)
        elif replace == "entropy":
            text = pattern.sub(_entropy_replace, text)
        elif replace == "cookie":
            text = pattern.sub(_cookie_replace, text)
        else:
            text = pattern.sub(lambda m, _k=kind, _r=replace: _r(m, _k), text)
    text = _BASE64_TOKEN.sub(_base64_credential_replace, text)
    return _PREFIXED_TOKEN.sub(_prefixed_replace, text)


def is_secret_key(name):
    """True when a mapping key names a secret (``password``, ``DB_TOKEN``, ``api_key``...)."""
    if not isinstance(name, str):
        return False
    lowered = name.lower()
    if lowered in _NOT_SECRET_KEYS or _ABOUT_SECRET.search(lowered):
        return False
    return bool(_SECRET_KEY_RE.match(name))


def redact_value(value):
    """Redact recursively: strings are redacted, mappings and sequences walked.

    A mapping value under a secret-named key (``password``, ``api_key``...) that is a
    non-empty scalar and could be a secret is replaced whole. Other types (numbers,
    booleans, None) are returned unchanged. Tuples stay tuples; sets become lists.
    """
    if isinstance(value, (str, bytes)):
        return redact_text(value)
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if is_secret_key(key) and isinstance(item, (str, bytes)) and item != "" \
                    and not _harmless(item if isinstance(item, str) else item.decode("utf-8", "replace")):
                result[key] = MARK % _kind_for_key(key)
            elif is_secret_key(key) and isinstance(item, (int, float)) and not isinstance(item, bool) \
                    and len(str(item)) > 12:
                result[key] = MARK % _kind_for_key(key)
            else:
                result[key] = redact_value(item)
        return result
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_value(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return [redact_value(item) for item in sorted(value, key=str)]
    return value
