"""pyapns-client 2.0.6 at its defaults against an HTTP/2 gateway: the pyapns-client client of
HTTP2ClientTests. Run it with the virtualenv of scripts/h2-python-clients.sh:

    .build/legacy-clients/h2-python/venv/bin/python scripts/pyapns-client-sender.py \
        HOST PORT CA_PEM AUTH_KEY_P8 KEY_ID TEAM_ID COUNT DEAD_EVERY

Token authentication with pyapns-client's own signing (its `iat` is `time.time()`, with a
fraction); its own httpx client (ALPN h2, one connection), given CA_PEM as its
`root_cert_path`; one push after another, as its API sends. Notification n (1...COUNT) goes to
a token ending in `dead` when n is a multiple of DEAD_EVERY, else in `a11e`. Prints one JSON
line: {"sent": COUNT, "results": [what pyapns-client answered for notification n, "200" or
"STATUS REASON"], "timestamps": [the 410s' timestamps], "faults": [pyapns-client's own warnings
and errors, and other exceptions]} and exits.
"""
import json
import logging
import sys

from pyapns_client import APNSClient, APNSException, IOSNotification, IOSPayload, IOSPayloadAlert, UnregisteredException

host, port, ca, key_path, key_id, team_id = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
count, dead_every = int(sys.argv[7]), int(sys.argv[8])


class Faults(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage().splitlines()[0])


faults = Faults()
logging.getLogger("pyapns_client").addHandler(faults)


class Gateway(APNSClient):
    # pyapns-client knows only Apple's hosts: the one thing changed is where it connects.
    BASE_URLS = {APNSClient.MODE_PROD: "https://%s:%d" % (host, port)}


client = Gateway(mode=APNSClient.MODE_PROD, root_cert_path=ca, auth_key_path=key_path,
                 auth_key_id=key_id, team_id=team_id)
notification = IOSNotification(payload=IOSPayload(alert=IOSPayloadAlert(title="Spring sale", body="Up to 50% off"), badge=1),
                               topic="com.example.app")
results, timestamps = [], []
for n in range(1, count + 1):
    token = "%060x%s" % (n, "dead" if n % dead_every == 0 else "a11e")
    try:
        client.push(notification=notification, device_token=token)
        results.append("200")
    except APNSException as error:
        # The exception's class names Apple's reason: UnregisteredException is "Unregistered".
        results.append("%s %s" % (error.status_code, type(error).__name__[:-len("Exception")]))
        if isinstance(error, UnregisteredException):
            timestamps.append(error.timestamp)
    except Exception as error:
        faults.messages.append("notification %d: %s: %s" % (n, type(error).__name__, error))
        results.append("exception")
client.close()
print(json.dumps({"sent": count, "results": results, "timestamps": timestamps, "faults": faults.messages}), flush=True)
