# Autoscaling policies: targets are added here.
