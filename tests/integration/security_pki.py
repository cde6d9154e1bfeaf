"""Test PKI and SCRAM helpers for the security tests. Everything is generated at test time with
the openssl command line (no private key is ever committed): a CA, a broker certificate for
127.0.0.1/localhost (its key encrypted with a password, to exercise ssl.key.password), a client
certificate signed by the CA, a self-signed (untrusted) client certificate and an expired one.
EC P-256 keys keep generation fast."""

import base64
import hashlib
import hmac
import json
import os
import subprocess

KEY_PASSWORD = "broker-key-pass"


def _run(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _key(cwd, name):
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=cwd)


def _csr(cwd, name, subj):
    _key(cwd, name)
    _run("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=cwd)


def _sign(cwd, name, ext=None):
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2"]
    if ext:
        with open(os.path.join(cwd, f"{name}.ext"), "w") as f:
            f.write(ext)
        args += ["-extfile", f"{name}.ext"]
    _run(*args, cwd=cwd)


def _sign_expired(cwd, name):
    """openssl ca can backdate: valid for one day in 2020."""
    os.makedirs(os.path.join(cwd, "ca-db"), exist_ok=True)
    open(os.path.join(cwd, "ca-db", "index.txt"), "w").close()
    with open(os.path.join(cwd, "ca-db", "serial"), "w") as f:
        f.write("1000\n")
    with open(os.path.join(cwd, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca=test\n[test]\ndir=ca-db\ndatabase=ca-db/index.txt\nserial=ca-db/serial\n"
                "new_certs_dir=ca-db\ncertificate=ca.pem\nprivate_key=ca.key\ndefault_md=sha256\n"
                "policy=any\nunique_subject=no\n[any]\ncommonName=supplied\norganizationName=optional\n")
    _run("ca", "-batch", "-config", "ca.cnf", "-in", f"{name}.csr", "-out", f"{name}.pem", "-notext",
         "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", cwd=cwd)


def make_pki(d):
    """Writes the PKI into directory d and returns a dict of paths."""
    os.makedirs(d, exist_ok=True)
    _key(d, "ca")
    _run("req", "-x509", "-new", "-key", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Gregor Test CA",
         cwd=d)
    _csr(d, "broker", "/CN=broker/O=Gregor")
    _sign(d, "broker", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("pkcs8", "-topk8", "-in", "broker.key", "-out", "broker-enc.key", "-v2", "aes-256-cbc",
         "-passout", f"pass:{KEY_PASSWORD}", cwd=d)
    with open(os.path.join(d, "broker-keystore.pem"), "w") as f:  # encrypted key + chain
        f.write(open(os.path.join(d, "broker-enc.key")).read())
        f.write(open(os.path.join(d, "broker.pem")).read())
    _csr(d, "client", "/CN=client1/O=Test")
    _sign(d, "client")
    _key(d, "rogue")  # self-signed: not trusted by the broker
    _run("req", "-x509", "-new", "-key", "rogue.key", "-out", "rogue.pem", "-days", "2", "-subj", "/CN=rogue",
         cwd=d)
    _csr(d, "expired", "/CN=expired")
    _sign_expired(d, "expired")
    # non-basic DN attributes (Java prints them as OIDs with #hex DER) and characters RFC 2253
    # escapes: Kafka's principal is User:<X500Principal.getName()> of this subject
    _csr(d, "svc", "/C=US/ST=CA/O=Example, Inc./OU=ServiceUsers/CN=svc-orders/emailAddress=svc@example.com"
                   "/serialNumber=S42")
    _sign(d, "svc")
    p = lambda n: os.path.join(d, n)  # noqa: E731
    return {"dir": d, "ca": p("ca.pem"), "broker_keystore": p("broker-keystore.pem"), "client_cert": p("client.pem"),
            "client_key": p("client.key"), "rogue_cert": p("rogue.pem"), "rogue_key": p("rogue.key"),
            "expired_cert": p("expired.pem"), "expired_key": p("expired.key"), "key_password": KEY_PASSWORD,
            "svc_cert": p("svc.pem"), "svc_key": p("svc.key"),
            # what javax.security.auth.x500.X500Principal.getName() returns for svc.pem
            "svc_dn": "2.5.4.5=#1303533432,1.2.840.113549.1.9.1=#160f737663406578616d706c652e636f6d,"
                      "CN=svc-orders,OU=ServiceUsers,O=Example\\, Inc.,ST=CA,C=US"}


def scram_credential(mechanism, password, iterations=4096, salt=None):
    """Kafka's credential string (ScramCredentialUtils), computed independently of Gregor."""
    alg = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    salt = salt or os.urandom(32)
    salted = hashlib.pbkdf2_hmac(alg, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", alg).digest()
    stored_key = hashlib.new(alg, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", alg).digest()
    b = lambda x: base64.b64encode(x).decode()  # noqa: E731
    return f"salt={b(salt)},stored_key={b(stored_key)},server_key={b(server_key)},iterations={iterations}"


def write_scram_user(zk, user, creds):
    """/config/users/<user> as kafka-configs --zookeeper writes it (creds: {mechanism: password})."""
    cfg = {m: scram_credential(m, pw) for m, pw in creds.items()}
    data = json.dumps({"version": 1, "config": cfg}).encode()
    path = f"/config/users/{user}"
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)


def broker_security_config(pki, ports, inter_broker="INTERNAL", client_auth="requested"):
    """server.properties keys for listeners INTERNAL (SASL_SSL, SCRAM-SHA-512, inter-broker),
    SSL (client certificates `client_auth`) and SASL_PLAINTEXT (PLAIN), on ports
    {"INTERNAL": p1, "SSL": p2, "SASL_PLAINTEXT": p3}."""
    ls = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    cfg = {
        "listeners": ls,
        "advertised.listeners": ls,
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": inter_broker,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker_keystore"],
        "ssl.key.password": pki["key_password"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"],
        "ssl.client.auth": client_auth,
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
            'password="admin-secret";',
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";',
        "connection.failed.authentication.delay.ms": "100",
    }
    return cfg
