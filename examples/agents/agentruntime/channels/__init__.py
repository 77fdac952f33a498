"""The channel programs: what runs in an agent's channel Deployment (``<agent>-channel-<type>``),
one program per chat type, each taking messages from its chat and giving back the agent's reply.

They share :mod:`agentruntime.channels.bridge`: a message goes to the operator's inbound endpoint
(``INBOUND_URL``) with the token of the channel's ServiceAccount the kubelet projects
(``INBOUND_TOKEN_FILE``, re-read for every post) and a delivery id the chat gives (so a message
the chat sends twice starts one run); an accepted one is a run, whose ``status.reply`` the program
reads (as the channel's ServiceAccount, whose Role may get its agent's runs by name) and posts back
to the chat. Credentials are the channel Secret's keys, a file each in ``CHANNEL_CREDENTIALS_DIR``.

- ``webhook``: any system that posts: ``POST /messages`` signed with ``WEBHOOK_SIGNING_KEY``,
  answered with the reply;
- ``telegram``: the Bot API's long polling (``getUpdates``), replies by ``sendMessage``;
- ``slack``: the Events API (``POST /slack/events``, signed), replies in the thread by
  ``chat.postMessage`` through the official ``slack_sdk``;
- ``whatsapp``: Meta's Cloud API webhook (``/whatsapp/webhook``, verified and signed), replies
  to the sender through the Graph API;
- ``discord``: a slash command through the Interactions endpoint (``POST
  /discord/interactions``, Ed25519-signed), answered in place of its deferred response.
"""
