"""Learning from use: an OpenAI-compatible server whose model trains on its own conversations.

Four loops share nothing but files in the run directory, so none blocks another:

1. serving (``server`` + ``policy``) answers requests and collects each turn (``sessions``);
2. collection writes turns to the on-disk ``queue``;
3. judging (``judge``) reads each turn's next state and scores it;
4. training (``trainer``) turns judged samples into new LoRA ``versions`` that serving hot-swaps.

``loops`` starts them as processes (or Ray actors) and ``status`` reports whether it helps.
"""
