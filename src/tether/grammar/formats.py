"""JSON Schema ``format`` values as regexes over the decoded string.

Each entry is a pattern in the common subset of Python and ECMA-262 syntax, read with
full-match semantics; ``tether.grammar.json_schema`` parses it like a ``pattern`` and
writes it over the escaped JSON text. Where a format is wider than a regex can say
exactly, the regex is the *stricter* side (a subset), so every string it allows is valid:

* ``time``/``date-time``: a leap second (``23:59:60``) only with a zero UTC offset;
* ``email``: dot-atom or quoted local part; domain is a hostname, ``[IPv4]`` or
  ``[IPv6:...]`` literal;
* ``hostname``: RFC 1123 labels, without ``--`` in positions 3-4 (so no IDNA A-labels);
  the 253-character total is enforced separately (``MAX_LENGTH``);
* ``uri``/``uri-reference``: RFC 3986 structure with IPv4 or bracketed IPv6 hosts
  (no ``IPvFuture``).

Dates are exact, including February 29 in leap years only.
"""

from __future__ import annotations

_D2 = "[0-9]{2}"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
DATE = f"(?:[0-9]{{4}}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
TIME = (
    f"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?{_OFFSET}"
    # a leap second is only valid at 23:59:60 UTC; written here with a zero offset
    "|23:59:60(?:\\.[0-9]+)?(?:[Zz]|[+-]00:00))"
)
DATE_TIME = f"{DATE}[Tt]{TIME}"

_DUR_SECOND = "[0-9]+S"
_DUR_MINUTE = f"[0-9]+M(?:{_DUR_SECOND})?"
_DUR_HOUR = f"[0-9]+H(?:{_DUR_MINUTE})?"
_DUR_TIME = f"T(?:{_DUR_HOUR}|{_DUR_MINUTE}|{_DUR_SECOND})"
_DUR_DAY = "[0-9]+D"
_DUR_MONTH = f"[0-9]+M(?:{_DUR_DAY})?"
_DUR_YEAR = f"[0-9]+Y(?:{_DUR_MONTH})?"
DURATION = f"P(?:(?:{_DUR_DAY}|{_DUR_MONTH}|{_DUR_YEAR})(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)"

_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = f"{_OCTET}(?:\\.{_OCTET}){{3}}"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{IPV4})"
IPV6 = (
    "(?:"
    f"(?:{_H16}:){{6}}{_LS32}"
    f"|::(?:{_H16}:){{5}}{_LS32}"
    f"|(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}"
    f"|(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}"
    f"|(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}"
    f"|(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}"
    f"|(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}"
    f"|(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}"
    f"|(?:(?:{_H16}:){{0,6}}{_H16})?::"
    ")"
)
# RFC 1123 label without "--" in positions 3-4 (RFC 5891 reserves those for A-labels,
# which are not generated)
_A = "[A-Za-z0-9]"
_LABEL = f"{_A}(?:{_A}|[A-Za-z0-9-](?:{_A}|(?:{_A}{{2}}|{_A}-|-{_A})(?:[A-Za-z0-9-]{{0,58}}{_A})?))?"
HOSTNAME = f"{_LABEL}(?:\\.{_LABEL})*"
_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_QUOTED = '"(?:[ !#-\\[\\]-~]|\\\\[ -~])*"'
EMAIL = f"(?:{_ATEXT}+(?:\\.{_ATEXT}+)*|{_QUOTED})@(?:{HOSTNAME}|\\[{IPV4}\\]|\\[IPv6:{IPV6}\\])"
UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

_PCT = "%[0-9A-Fa-f]{2}"
_UNRESERVED = "A-Za-z0-9\\-._~"
_SUB_DELIMS = "!$&'()*+,;="
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT = f"{_PCHAR}*"
_SEGMENT_NZ = f"{_PCHAR}+"
_SEGMENT_NZ_NC = f"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_USERINFO = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_REG_NAME = f"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_HOST = f"(?:\\[{IPV6}\\]|{IPV4}|{_REG_NAME})"
_AUTHORITY = f"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_PATH_ABEMPTY = f"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = f"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_PATH_ROOTLESS = f"{_SEGMENT_NZ}(?:/{_SEGMENT})*"
_PATH_NOSCHEME = f"{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*"
_QUERY = f"(?:\\?(?:{_PCHAR}|[/?])*)?"
_FRAGMENT = f"(?:#(?:{_PCHAR}|[/?])*)?"
_SCHEME = "[A-Za-z][A-Za-z0-9+\\-.]*"
URI = (
    f"{_SCHEME}:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_ROOTLESS})?"
    f"{_QUERY}{_FRAGMENT}"
)
_RELATIVE = f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME})?{_QUERY}{_FRAGMENT}"
URI_REFERENCE = f"(?:{URI}|{_RELATIVE})"
JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"
RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{JSON_POINTER})"

FORMATS: dict[str, str] = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "duration": DURATION,
    "email": EMAIL,
    "hostname": HOSTNAME,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "uuid": UUID,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
}

# formats whose regex does not bound the length the standard allows
MAX_LENGTH: dict[str, int] = {"hostname": 253}

__all__ = ["FORMATS", "MAX_LENGTH"]
