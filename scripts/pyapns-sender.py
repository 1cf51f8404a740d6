"""PyAPNs 2.0.1 in enhanced mode (command 1), as its users sent with it, against a gateway:
the PyAPNs client of LegacyClientTests. Run it with the virtualenv of scripts/pyapns.sh:

    .build/legacy-clients/pyapns/venv/bin/python scripts/pyapns-sender.py HOST PORT CERT KEY COUNT DEAD_EVERY

Notification n (1...COUNT) has identifier n; its token ends in `dead` when n is a multiple of
DEAD_EVERY, else in `a11e`. PyAPNs resends what follows a rejected notification by itself.
Once every dead token has had its error response (or after a minute), prints one JSON line:
{"sent": COUNT, "error_responses": [[status, identifier], ...], "faults": [PyAPNs's own
warnings and errors]} and exits.
"""
import json
import logging
import os
import sys
import threading

import apns

host, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
count, dead_every = int(sys.argv[5]), int(sys.argv[6])


class Faults(logging.Handler):
    """PyAPNs logs what goes wrong (a failed read of an error response, a failed write) and
    carries on, so its log is where a fault shows."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage().splitlines()[0])


faults = Faults()
logging.getLogger("apns").addHandler(faults)

connection = apns.GatewayConnection(cert_file=cert, key_file=key, enhanced=True)
connection.server, connection.port = host, port  # PyAPNs knows only Apple's two gateways
answered = threading.Condition()
responses = []


def on_error_response(response):
    with answered:
        responses.append([response["status"], response["identifier"]])
        answered.notify_all()


connection.register_response_listener(on_error_response)
payload = apns.Payload(alert="Spring sale", badge=1)
for n in range(1, count + 1):
    token = "%060x%s" % (n, "dead" if n % dead_every == 0 else "a11e")
    connection.send_notification(token, payload, identifier=n)

with answered:
    answered.wait_for(lambda: len(responses) >= count // dead_every, timeout=60)
# The error-response thread holds the send lock while it resends what followed a rejection.
with connection._send_lock:
    connection.force_close()
    connection._disconnect()
print(json.dumps({"sent": count, "error_responses": responses, "faults": faults.messages}), flush=True)
# PyAPNs's error-response thread is not a daemon and wakes only every 10 s to see it was
# asked to stop: leave without waiting for it, the socket is closed.
os._exit(0)
