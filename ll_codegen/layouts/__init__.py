"""layouts"""
