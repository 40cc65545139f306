# Models arrive with this app's first feature; the app is wired now so the layer
# order (annotation <- judging <- analytics) is enforced from the start.
