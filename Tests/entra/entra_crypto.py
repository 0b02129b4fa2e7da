"""Keys, certificates and RS256 JWTs for the Entra ID test emulator (entra.py).

Test emulator of the Microsoft identity platform's public v2.0 protocol, written from public documentation for brokerd's tests. Not Microsoft code; never expose it.

Python's standard library cannot make X.509 certificates, so the `openssl` command line makes
them (a throwaway CA, a server certificate for 127.0.0.1/::1/localhost, and a self-signed
certificate for the token-signing key, whose DER goes into the JWKS `x5c`). Signing itself is
plain integer arithmetic (RSASSA-PKCS1-v1_5 with SHA-256, RFC 8017 §8.2), with the key read
from its PEM by a minimal DER reader.
"""

import base64
import ctypes
import ctypes.util
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile

_DIGEST_INFO_SHA256 = bytes.fromhex("3031300d060960864801650304020105000420")

_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = brokerd entra emulator
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[v3_leaf]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost{extra_san}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
[v3_sign]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
subjectKeyIdentifier = hash
"""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int_bytes(value: int) -> bytes:
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def openssl_available():
    """The `openssl version` line, or None."""
    if not shutil.which("openssl"):
        return None
    result = subprocess.run(["openssl", "version"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def _openssl(*args, cwd):
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (args[0], result.stderr.strip()))
    return result.stdout


def _valid_for_a_day(path, cwd):
    if not os.path.exists(path):
        return False
    return subprocess.run(["openssl", "x509", "-checkend", "86400", "-noout", "-in", path],
                          cwd=cwd, capture_output=True).returncode == 0


def ensure_pki(state_dir, extra_dns_names=()):
    """Creates (or reuses) the CA, a fresh server certificate and the signing key in state_dir.

    Files: ca.pem, ca-key.pem (reused while valid for another day), server.pem, server-key.pem
    (new at every start; 127.0.0.1, ::1, localhost and extra_dns_names), signing-key.pem (RSA 2048,
    reused so `kid` stays), signing-cert.pem.
    """
    for name in extra_dns_names:
        if not name or not all(ch.isalnum() or ch in "-.*" for ch in name):
            raise ValueError("not a DNS name: %r" % name)
    config = os.path.join(state_dir, "openssl.cnf")
    with open(config, "w") as f:
        f.write(_OPENSSL_CONFIG.replace("{extra_san}", "".join(",DNS:" + n for n in extra_dns_names)))
    old_umask = os.umask(0o077)
    try:
        if not (_valid_for_a_day("ca.pem", state_dir) and os.path.exists(os.path.join(state_dir, "ca-key.pem"))):
            _openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "30", "-sha256", "-config", "openssl.cnf",
                     "-extensions", "v3_ca",
                     "-subj", "/CN=brokerd Entra emulator test CA %s" % secrets.token_hex(4), cwd=state_dir)
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", "server-key.pem", "-out", "server.csr", "-subj", "/CN=127.0.0.1",
                 "-config", "openssl.cnf", cwd=state_dir)
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
                 "-set_serial", "0x" + secrets.token_hex(12), "-days", "7", "-sha256",
                 "-extfile", "openssl.cnf", "-extensions", "v3_leaf", "-out", "server.pem", cwd=state_dir)
        os.remove(os.path.join(state_dir, "server.csr"))
        if not os.path.exists(os.path.join(state_dir, "signing-key.pem")):
            _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                     "-out", "signing-key.pem", cwd=state_dir)
        if not _valid_for_a_day("signing-cert.pem", state_dir):
            _openssl("req", "-x509", "-new", "-key", "signing-key.pem", "-out", "signing-cert.pem", "-days", "365",
                     "-sha256", "-config", "openssl.cnf", "-extensions", "v3_sign",
                     "-subj", "/CN=brokerd Entra emulator token signing", cwd=state_dir)
    finally:
        os.umask(old_umask)
    for public in ("ca.pem", "server.pem", "signing-cert.pem"):
        os.chmod(os.path.join(state_dir, public), 0o644)
    return {name: os.path.join(state_dir, name + ".pem")
            for name in ("ca", "ca-key", "server", "server-key", "signing-key", "signing-cert")}


# --- minimal DER reading (enough for PKCS#1 / PKCS#8 RSA private keys) ---------------------------

def _der_item(data, pos):
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    return tag, data[pos:pos + length], pos + length


def _der_sequence(data):
    items, pos = [], 0
    while pos < len(data):
        tag, value, pos = _der_item(data, pos)
        items.append((tag, value))
    return items


def _pem_der(text, label):
    begin, end = "-----BEGIN %s-----" % label, "-----END %s-----" % label
    if begin not in text:
        return None
    body = text.split(begin, 1)[1].split(end, 1)[0]
    return base64.b64decode("".join(body.split()))


class _LibcryptoSigner:
    """RS256 through the system libcrypto (ctypes; the library Python's ssl module uses): ~10x faster than pow().

    Only used after it produced the same signature as the pure-Python path (PKCS#1 v1.5 is deterministic).
    """

    def __init__(self, pem_text):
        name = ctypes.util.find_library("crypto")
        if not name:
            raise OSError("libcrypto not found")
        lib = ctypes.CDLL(name)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        lib.BIO_new_mem_buf.restype, lib.BIO_new_mem_buf.argtypes = vp, [ctypes.c_char_p, ctypes.c_int]
        lib.BIO_free.argtypes = [vp]
        lib.PEM_read_bio_PrivateKey.restype, lib.PEM_read_bio_PrivateKey.argtypes = vp, [vp, vp, vp, vp]
        lib.EVP_sha256.restype, lib.EVP_sha256.argtypes = vp, []
        lib.EVP_MD_CTX_new.restype, lib.EVP_MD_CTX_new.argtypes = vp, []
        lib.EVP_MD_CTX_free.argtypes = [vp]
        lib.EVP_DigestSignInit.restype = ctypes.c_int
        lib.EVP_DigestSignInit.argtypes = [vp, vp, vp, vp, vp]
        lib.EVP_DigestSign.restype = ctypes.c_int
        lib.EVP_DigestSign.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(sz), ctypes.c_char_p, sz]
        data = pem_text.encode()
        bio = lib.BIO_new_mem_buf(data, len(data))
        self.pkey = lib.PEM_read_bio_PrivateKey(bio, None, None, None)
        lib.BIO_free(bio)
        if not self.pkey:
            raise OSError("libcrypto could not read the key")
        self.lib, self.sha256 = lib, lib.EVP_sha256()

    def sign(self, message, size):
        lib = self.lib
        ctx = lib.EVP_MD_CTX_new()
        try:
            out, out_len = ctypes.create_string_buffer(size), ctypes.c_size_t(size)
            if lib.EVP_DigestSignInit(ctx, None, self.sha256, None, self.pkey) != 1 or \
                    lib.EVP_DigestSign(ctx, out, ctypes.byref(out_len), message, len(message)) != 1:
                raise OSError("EVP_DigestSign failed")
            return out.raw[:out_len.value]
        finally:
            lib.EVP_MD_CTX_free(ctx)


class RSASigningKey:
    """An RSA private key read from PEM; signs RS256 (libcrypto via ctypes when it agrees, else pure-Python CRT)."""

    def __init__(self, key_path, cert_path, use_libcrypto=True):
        with open(key_path) as f:
            text = f.read()
        der = _pem_der(text, "RSA PRIVATE KEY")
        if der is None:  # PKCS#8: SEQUENCE { version, AlgorithmIdentifier, OCTET STRING { RSAPrivateKey } }
            outer = _der_sequence(_der_item(_pem_der(text, "PRIVATE KEY"), 0)[1])
            der = outer[2][1]
        numbers = [int.from_bytes(value, "big") for tag, value in _der_sequence(_der_item(der, 0)[1]) if tag == 0x02]
        _, self.n, self.e, self.d, self.p, self.q, self.dp, self.dq, self.qinv = numbers[:9]
        self.size = (self.n.bit_length() + 7) // 8
        with open(cert_path) as f:
            self.cert_der = _pem_der(f.read(), "CERTIFICATE")
        # Entra publishes kid == x5t (base64url SHA-1 of the certificate).
        self.x5t = b64url(hashlib.sha1(self.cert_der).digest())
        self.kid = self.x5t
        self.fast = None
        if use_libcrypto:
            try:
                fast = _LibcryptoSigner(text)
                probe = b"brokerd entra emulator self-check"
                if fast.sign(probe, self.size) == self.sign_slow(probe):
                    self.fast = fast
            except (OSError, AttributeError):
                self.fast = None

    @property
    def backend(self):
        return "libcrypto" if self.fast else "python"

    def sign(self, message: bytes) -> bytes:
        if self.fast is not None:
            return self.fast.sign(message, self.size)
        return self.sign_slow(message)

    def sign_slow(self, message: bytes) -> bytes:
        t = _DIGEST_INFO_SHA256 + hashlib.sha256(message).digest()
        em = b"\x00\x01" + b"\xff" * (self.size - len(t) - 3) + b"\x00" + t
        m = int.from_bytes(em, "big")
        m1 = pow(m, self.dp, self.p)
        m2 = pow(m, self.dq, self.q)
        h = (self.qinv * (m1 - m2)) % self.p
        return (m2 + h * self.q).to_bytes(self.size, "big")

    def jwk(self, issuer=None):
        key = {"kty": "RSA", "use": "sig", "kid": self.kid, "x5t": self.x5t,
               "n": b64url(_int_bytes(self.n)), "e": b64url(_int_bytes(self.e)),
               "x5c": [base64.b64encode(self.cert_der).decode("ascii")]}
        if issuer:
            key["issuer"] = issuer
        return key

    def jwt(self, claims: dict, typ="JWT") -> str:
        header = {"typ": typ, "alg": "RS256", "kid": self.kid, "x5t": self.x5t}
        signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "." +
                         b64url(json.dumps(claims, separators=(",", ":")).encode()))
        return signing_input + "." + b64url(self.sign(signing_input.encode("ascii")))


def write_json_atomically(path, value):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ready-", suffix=".tmp")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(value, f)
        f.write("\n")
    os.replace(tmp, path)
