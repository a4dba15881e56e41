# Selection policies: targets are added here.
