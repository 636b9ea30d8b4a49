#!/usr/bin/env python3
"""Signing recipe of the merchant payment service, in Python 3 with `cryptography`.

Copy the functions you need; `main` shows them at work. Three signing strings (contract
decisions.md sections 1, 3 and 7), all RSASSA-PKCS1-v1_5 / SHA-256, standard Base64:

  sign_request          the nine-line request string, X-SVC-Sign with the merchant's private key
  verify_response       the five-line response string, checked with the platform's public key
  verify_notification   the four-line notification string, checked likewise, plus the time window

Needs only the standard library and `cryptography` (Debian: apt-get install python3-cryptography;
elsewhere: pip install cryptography). Run `python3 mps_signing.py` for the commands.
"""

import base64
import binascii
import hashlib
import http.client
import json
import os
import secrets
import string
import sys
import time
import urllib.parse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

ALPHANUMERIC = string.ascii_letters + string.digits
NOTIFY_TOLERANCE_SECONDS = 300


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def normalize_content_type(value) -> str:
    """Media type only, lower-cased, parameters and surrounding blanks removed; '' when absent."""
    return "" if value is None else value.split(";", 1)[0].strip().lower()


def _sign(private_key, text: str) -> str:
    signature = private_key.sign(text.encode("utf-8"), padding.PKCS1v15(), hashes.SHA256())
    return base64.b64encode(signature).decode("ascii")


def _verify(public_key, text: str, signature: str) -> bool:
    try:
        raw = base64.b64decode(signature, validate=True)
        public_key.verify(raw, text.encode("utf-8"), padding.PKCS1v15(), hashes.SHA256())
        return True
    except (InvalidSignature, binascii.Error, ValueError):
        return False


def load_private_key(pem: bytes):
    """PKCS#8 ("BEGIN PRIVATE KEY") or PKCS#1 ("BEGIN RSA PRIVATE KEY"), unencrypted."""
    return serialization.load_pem_private_key(pem, password=None)


def load_platform_keys(document: str) -> dict:
    """{keyId: public key} from the JSON of GET /api/admin/v1/platform-keys (platform-keys.json)."""
    keys = json.loads(document)["keys"]
    return {k["keyId"]: serialization.load_pem_public_key(k["publicKeyPem"].encode("ascii")) for k in keys}


def request_signing_string(method, target, app_id, key_id, timestamp, nonce, request_id, content_type, body: bytes) -> str:
    """decisions.md section 1: nine lines, each ending in LF. target: path plus query exactly as sent."""
    lines = [method.upper(), target, app_id, key_id, timestamp, nonce, request_id]
    lines += [normalize_content_type(content_type), sha256_hex(body)]
    return "".join(line + "\n" for line in lines)


def sign_request(private_key, method, target, app_id, key_id, body: bytes = b"", content_type=None,
                 timestamp=None, nonce=None, request_id=None) -> dict:
    """The six X-SVC-* headers (plus Content-Type when given) for one request. Send them unchanged.
    A retry reuses request_id and the body bytes, with a fresh timestamp, nonce and signature."""
    timestamp = timestamp or str(int(time.time()))
    nonce = nonce or "".join(secrets.choice(ALPHANUMERIC) for _ in range(32))
    request_id = request_id or "req_" + "".join(secrets.choice(ALPHANUMERIC) for _ in range(24))
    text = request_signing_string(method, target, app_id, key_id, timestamp, nonce, request_id, content_type, body)
    headers = {
        "X-SVC-App-Id": app_id,
        "X-SVC-Key-Id": key_id,
        "X-SVC-Timestamp": timestamp,
        "X-SVC-Nonce": nonce,
        "X-SVC-Request-Id": request_id,
        "X-SVC-Sign": _sign(private_key, text),
    }
    if content_type is not None:
        headers["Content-Type"] = content_type
    return headers


def response_signing_string(timestamp, nonce, request_id, status: int, body: bytes) -> str:
    """decisions.md section 3: five lines, each ending in LF."""
    return f"{timestamp}\n{nonce}\n{request_id}\n{status}\n{sha256_hex(body)}\n"


RESPONSE_HEADERS = ("X-SVC-Response-Sign", "X-SVC-Response-Key-Id", "X-SVC-Response-Timestamp", "X-SVC-Response-Nonce")


def verify_response(platform_keys: dict, status: int, headers, body: bytes, sent_request_id: str) -> bool:
    """True for a verified answer, False for an unsigned one (the early rejections are unsigned; a
    conforming platform signs every 2xx). Raises ValueError for anything that must be treated as
    forged: some signature headers only, an unknown key id, an answer to another request, a bad
    signature. `headers`: a case-insensitive mapping (http.client's message, or _Headers below)."""
    sign, key_id, timestamp, nonce = (headers.get(name) for name in RESPONSE_HEADERS)
    present = [v is not None for v in (sign, key_id, timestamp, nonce)]
    if not any(present):
        return False
    if not all(present):
        raise ValueError("some of the response signature headers only")
    if key_id not in platform_keys:
        raise ValueError(f"unknown platform key id {key_id!r}: refresh platform-keys.json")
    echoed = headers.get("X-SVC-Request-Id")
    if echoed != sent_request_id:
        raise ValueError("the answer echoes another request id")
    if not _verify(platform_keys[key_id], response_signing_string(timestamp, nonce, echoed, status, body), sign):
        raise ValueError("bad response signature")
    return True


def notification_signing_string(timestamp, nonce, event_id, body: bytes) -> str:
    """decisions.md section 7: four lines, each ending in LF."""
    return f"{timestamp}\n{nonce}\n{event_id}\n{sha256_hex(body)}\n"


def verify_notification(platform_keys: dict, headers, raw_body: bytes, now=None) -> dict:
    """The verified event (parsed), or ValueError: answer the platform non-2xx then (it retries).
    Verify the raw body bytes as received, before parsing them. De-duplicate by eventId."""
    names = ("X-SVC-Event-Id", "X-SVC-Notify-Timestamp", "X-SVC-Notify-Nonce", "X-SVC-Notify-Key-Id", "X-SVC-Notify-Sign")
    event_id, timestamp, nonce, key_id, sign = (headers.get(name) for name in names)
    if not all((event_id, timestamp, nonce, key_id, sign)):
        raise ValueError("a notification header is missing")
    if key_id not in platform_keys:
        raise ValueError(f"unknown platform key id {key_id!r}: refresh platform-keys.json, answer non-2xx meanwhile")
    signed = notification_signing_string(timestamp, nonce, event_id, raw_body)
    if not timestamp.isdigit() or not _verify(platform_keys[key_id], signed, sign):
        raise ValueError("bad notification signature")
    now = int(time.time()) if now is None else now
    if abs(now - int(timestamp)) > NOTIFY_TOLERANCE_SECONDS:
        raise ValueError("notification timestamp outside the 300 s window")
    event = json.loads(raw_body)
    if not isinstance(event, dict) or event.get("eventId") != event_id:
        raise ValueError("the body's eventId differs from X-SVC-Event-Id")
    return event


class _Headers(dict):
    """Header names compared case-insensitively (HTTP header names are)."""

    def __init__(self, pairs):
        super().__init__((k.lower(), v) for k, v in pairs)

    def get(self, name, default=None):
        return super().get(name.lower(), default)


def call(method: str, target: str, body=None):
    """One signed open-API call with the settings of merchant.env; returns (status, body bytes, verified)."""
    env = os.environ
    base = urllib.parse.urlsplit(env["MPS_BASE_URL"])
    target = base.path.rstrip("/") + target  # a base URL's path prefix is part of the signed target
    with open(env["MPS_PRIVATE_KEY_FILE"], "rb") as f:
        private_key = load_private_key(f.read())
    with open(env["MPS_PLATFORM_KEYS_FILE"], encoding="utf-8") as f:
        platform_keys = load_platform_keys(f.read())
    content_type = "application/json" if method == "POST" else None  # a GET sends neither body nor Content-Type
    payload = body if body is not None else b""
    headers = sign_request(private_key, method, target, env["MPS_APP_ID"], env["MPS_KEY_ID"], payload, content_type)
    connection_class = http.client.HTTPSConnection if base.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(base.netloc, timeout=15)
    try:
        connection.request(method, target, body=payload if method == "POST" else None, headers=headers)
        response = connection.getresponse()
        answer = response.read()
        verified = verify_response(platform_keys, response.status, response.headers, answer, headers["X-SVC-Request-Id"])
    finally:
        connection.close()
    if 200 <= response.status < 300 and not verified:
        raise ValueError("a 2xx answer without response signature")
    return response.status, answer, verified


def _read(path: str) -> bytes:
    if path == "":
        return b""
    with open(path, "rb") as f:
        return f.read()


def _read_headers(path: str) -> _Headers:
    """A file of 'Name: value' lines."""
    lines = _read(path).decode("utf-8").splitlines()
    return _Headers(tuple(part.strip() for part in line.split(":", 1)) for line in lines if ":" in line)


USAGE = """usage: mps_signing.py COMMAND ...
  sign-request PRIVATE_KEY_PEM METHOD TARGET APP_ID KEY_ID TIMESTAMP NONCE REQUEST_ID CONTENT_TYPE BODY_FILE
      prints the signed headers ('Name: value' lines); CONTENT_TYPE '' = no header, BODY_FILE '' = no body
  verify-response PLATFORM_KEYS_JSON HEADERS_FILE STATUS BODY_FILE SENT_REQUEST_ID
  verify-notification PLATFORM_KEYS_JSON HEADERS_FILE BODY_FILE [NOW]
      HEADERS_FILE: the received headers as 'Name: value' lines; NOW: epoch seconds (default: the clock)
  call METHOD TARGET [BODY_FILE]
      a signed call with the settings of merchant.env (MPS_BASE_URL, MPS_APP_ID, MPS_KEY_ID,
      MPS_PRIVATE_KEY_FILE, MPS_PLATFORM_KEYS_FILE); the answer verified, its body printed
exit 0: done / valid; 1: refused, invalid or a non-2xx answer; 2: wrong command line"""


def main(argv) -> int:
    command, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        if command == "sign-request" and len(args) == 10:
            key = load_private_key(_read(args[0]))
            method, target, app_id, key_id, timestamp, nonce, request_id, content_type, body_file = args[1:]
            headers = sign_request(key, method, target, app_id, key_id, _read(body_file), content_type or None,
                                   timestamp, nonce, request_id)
            print("\n".join(f"{name}: {value}" for name, value in headers.items()))
            return 0
        if command == "verify-response" and len(args) == 5:
            keys = load_platform_keys(_read(args[0]).decode("utf-8"))
            verified = verify_response(keys, int(args[2]), _read_headers(args[1]), _read(args[3]), args[4])
            print("verified" if verified else "unsigned")
            return 0 if verified else 1
        if command == "verify-notification" and len(args) in (3, 4):
            keys = load_platform_keys(_read(args[0]).decode("utf-8"))
            now = int(args[3]) if len(args) == 4 else None
            event = verify_notification(keys, _read_headers(args[1]), _read(args[2]), now)
            print(json.dumps(event))
            return 0
        if command == "call" and len(args) in (2, 3):
            status, answer, verified = call(args[0].upper(), args[1], _read(args[2]) if len(args) == 3 else None)
            print(f"HTTP {status}, " + ("response signature verified" if verified else "unsigned"), file=sys.stderr)
            print(answer.decode("utf-8"))
            return 0 if 200 <= status < 300 else 1
    except ValueError as err:  # includes json.JSONDecodeError
        print(f"invalid: {err}", file=sys.stderr)
        return 1
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
